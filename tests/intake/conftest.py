"""A REAL IMAP server for the mailbox tests: Dovecot from Debian's packages
(`apt-get install dovecot-imapd`; .ci/run installs it), started once per test
session with a throwaway configuration in a temp directory: passwd-file users,
plaintext login on loopback, maildirs under the temp directory, a free loopback
port, in the foreground. Tests using `imap_mailbox` are skipped when the dovecot
binary is absent.

    def test_it(imap_mailbox):
        imap_mailbox.append(raw_bytes)        # APPEND into INBOX, like a delivery
        imap_mailbox.host / .port / .username / .password
"""

import imaplib
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.ports import free_port, wait_for_port

DOVECOT = shutil.which("dovecot") or (
    "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None
)
requires_dovecot = pytest.mark.skipif(
    DOVECOT is None,
    reason="needs a real IMAP server: the dovecot binary is absent "
    "(apt-get install -y dovecot-imapd, as .ci/run does)",
)


USERS = 500  # mailboxes per test session (one per test)


class Dovecot:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="dovecot-"))
        self.root.chmod(0o755)  # the mail user must reach its maildir
        self.port = free_port()
        # Users are made up front: passwd-file is re-read on an mtime change, which
        # can miss two writes in the same second.
        self.passwd = self.root / "passwd"
        self._users = [(f"u{n:04d}", uuid.uuid4().hex) for n in range(USERS)]
        self.passwd.write_text("".join(f"{u}:{{PLAIN}}{p}\n" for u, p in self._users))
        self.passwd.chmod(0o644)
        home = self.root / "home"
        home.mkdir()
        if os.geteuid() == 0:
            # Dovecot refuses uid 0 for mail processes.
            user = pwd.getpwnam("nobody")
            uid, gid = user.pw_uid, user.pw_gid
            os.chown(home, uid, gid)
            users = ""
        else:
            uid, gid = os.getuid(), os.getgid()
            me = pwd.getpwuid(uid).pw_name
            users = f"default_internal_user = {me}\ndefault_login_user = {me}\n"
        (self.root / "run").mkdir()
        (self.root / "state").mkdir()
        self.config = self.root / "dovecot.conf"
        self.log = self.root / "dovecot.log"
        self.config.write_text(
            textwrap.dedent(
                f"""\
                protocols = imap
                listen = 127.0.0.1
                base_dir = {self.root}/run
                state_dir = {self.root}/state
                log_path = {self.log}
                ssl = no
                disable_plaintext_auth = no
                auth_mechanisms = plain login
                first_valid_uid = 1
                passdb {{
                  driver = passwd-file
                  args = scheme=PLAIN username_format=%u {self.passwd}
                }}
                userdb {{
                  driver = static
                  args = uid={uid} gid={gid} home={home}/%u
                }}
                mail_location = maildir:~/Maildir
                service imap-login {{
                  chroot =
                  inet_listener imap {{
                    address = 127.0.0.1
                    port = {self.port}
                  }}
                  inet_listener imaps {{
                    port = 0
                  }}
                }}
                service anvil {{
                  chroot =
                }}
                """
            )
            + users
        )
        self.home = home
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for_port(self.port, timeout=20)
        except TimeoutError:
            self.stop()
            raise RuntimeError(f"dovecot did not start:\n{self.log_text()}") from None

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else "(no log)"

    def user_take(self) -> tuple[str, str]:
        """A user (and so a mailbox) no test has used yet."""
        return self._users.pop(0)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)
        shutil.rmtree(self.root, ignore_errors=True)


@dataclass
class Mailbox:
    server: Dovecot
    username: str
    password: str
    host: str = "127.0.0.1"

    @property
    def port(self) -> int:
        return self.server.port

    def append(self, raw: bytes) -> None:
        client = imaplib.IMAP4(self.host, self.port, timeout=10)
        try:
            client.login(self.username, self.password)
            kind, data = client.append("INBOX", None, None, raw)
            assert kind == "OK", data
        finally:
            client.logout()


@pytest.fixture(scope="session")
def dovecot_server():
    if DOVECOT is None:
        pytest.skip(requires_dovecot.kwargs["reason"])
    server = Dovecot()
    yield server
    server.stop()


@pytest.fixture
def imap_mailbox(dovecot_server) -> Mailbox:
    """A new, empty mailbox (its own user) on the session's Dovecot."""
    username, password = dovecot_server.user_take()
    return Mailbox(server=dovecot_server, username=username, password=password)
