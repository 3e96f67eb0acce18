"""A REAL IMAP server for the mailbox tests: Dovecot from Debian's packages
(`apt-get install dovecot-imapd`; .ci/run installs it), started once per test
session with a throwaway configuration in a temp directory: passwd-file users,
plaintext login on loopback, maildirs under the temp directory, a free loopback
port, in the foreground. Tests using `imap_mailbox` are skipped when the dovecot
binary is absent.

    def test_it(imap_mailbox):
        imap_mailbox.append(raw_bytes)        # APPEND into INBOX, like a delivery
        imap_mailbox.host / .port / .username / .password

`oauth_imap_mailbox(provider, email)` (a factory fixture) starts a Dovecot of its own
whose logins are SASL XOAUTH2 only: an oauth2 passdb asks the test's OAuthProvider
(tests/support/oauth_provider.py) to introspect each bearer token, as a Google or
Microsoft 365 IMAP server accepts only tokens its provider issued for that user.
"""

import imaplib
import ipaddress
import os
import pwd
import shutil
import subprocess
import tempfile
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.support.ports import free_port, wait_for_port

DOVECOT = shutil.which("dovecot") or (
    "/usr/sbin/dovecot" if Path("/usr/sbin/dovecot").exists() else None
)
requires_dovecot = pytest.mark.skipif(
    DOVECOT is None,
    reason="needs a real IMAP server: the dovecot binary is absent "
    "(apt-get install -y dovecot-imapd, as .ci/run does)",
)


def _self_signed(cert_path: Path, key_path: Path) -> None:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(days=1))
        .not_valid_after(now + timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    cert_path.chmod(0o644)
    key_path.chmod(0o600)


USERS = 500  # mailboxes per test session (one per test)


class Dovecot:
    def __init__(self, *, oauth2_introspection_url: str | None = None):
        self.root = Path(tempfile.mkdtemp(prefix="dovecot-"))
        self.root.chmod(0o755)  # the mail user must reach its maildir
        self.port = free_port()  # IMAP, with STARTTLS
        self.ssl_port = free_port()  # IMAPS
        # A throwaway CA-less self-signed certificate for 127.0.0.1: tests that use
        # TLS trust it through SSL_CERT_FILE (`ca_file`), as an operator would.
        self.ca_file = self.root / "cert.pem"
        _self_signed(self.root / "cert.pem", self.root / "key.pem")
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
        mechanisms = "plain login"
        passdb = f"""\
            passdb {{
              driver = passwd-file
              args = scheme=PLAIN username_format=%u {self.passwd}
            }}
            """
        if oauth2_introspection_url:
            # Bearer tokens only, each introspected (RFC 7662) at the test's provider.
            oauth2 = self.root / "dovecot-oauth2.conf.ext"
            oauth2.write_text(
                f"introspection_mode = post\n"
                f"introspection_url = {oauth2_introspection_url}\n"
                "username_attribute = username\n"
                "active_attribute = active\n"
                "active_value = true\n"
            )
            oauth2.chmod(0o644)
            mechanisms = "xoauth2 oauthbearer"
            passdb = f"""\
            passdb {{
              driver = oauth2
              mechanisms = xoauth2 oauthbearer
              args = {oauth2}
            }}
            """
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
                ssl = yes
                ssl_cert = <{self.root}/cert.pem
                ssl_key = <{self.root}/key.pem
                disable_plaintext_auth = no
                auth_mechanisms = {mechanisms}
                auth_failure_delay = 0
                login_trusted_networks = 127.0.0.0/8
                first_valid_uid = 1
                {passdb.strip()}
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
                    address = 127.0.0.1
                    port = {self.ssl_port}
                  }}
                }}
                service anvil {{
                  chroot =
                }}
                service auth {{
                  unix_listener {self.root}/run/auth-smtp {{
                    mode = 0666
                  }}
                }}
                """
            )
            + users
        )
        self.home = home
        self.mail_uid, self.mail_gid = uid, gid
        # Dovecot's authentication for an SMTP server (Postfix's SASL, tests/support/postfix.py).
        self.auth_socket = self.root / "run" / "auth-smtp"
        self.process = subprocess.Popen(
            [DOVECOT, "-F", "-c", str(self.config)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            wait_for_port(self.port, timeout=20, process=self.process)
            wait_for_port(self.ssl_port, timeout=20, process=self.process)
        except (TimeoutError, ChildProcessError):
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

    @property
    def ssl_port(self) -> int:
        return self.server.ssl_port

    @property
    def ca_file(self) -> str:
        return str(self.server.ca_file)

    # OAuth mailboxes: a bearer token for `username` instead of the password.
    access_token: Callable[[], str] | None = None

    def append(self, raw: bytes) -> None:
        client = imaplib.IMAP4(self.host, self.port, timeout=10)
        try:
            if self.access_token is not None:
                response = f"user={self.username}\x01auth=Bearer {self.access_token()}\x01\x01"
                client.authenticate("XOAUTH2", lambda _challenge: response.encode())
            else:
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


@pytest.fixture
def oauth_imap_mailbox():
    """A factory: (OAuthProvider, email) -> the mailbox of `email` on a Dovecot that
    logs in with XOAUTH2 only, introspecting tokens at that provider."""
    if DOVECOT is None:
        pytest.skip(requires_dovecot.kwargs["reason"])
    servers: list[Dovecot] = []

    def start(provider, email: str) -> Mailbox:
        server = Dovecot(oauth2_introspection_url=provider.introspect_url)
        servers.append(server)
        return Mailbox(
            server=server,
            username=email,
            password="",
            access_token=lambda: provider.access_token_issue(email),
        )

    yield start
    for server in servers:
        server.stop()
