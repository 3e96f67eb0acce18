"""A real Postfix on loopback, in its own throwaway configuration directory
(`postfix -c <dir>`, its own queue), for the tests that need a peer MTA's own delivery
status reports (tests/intake/test_postfix_reports.py).

    server = Postfix(dovecot=..., sender=("sender@sender.test", "u0001"))

It takes submissions on 127.0.0.1:`port` with STARTTLS (Dovecot's self-signed
certificate) and a login (SASL through the Dovecot's auth socket), and delivers with
virtual(8):
- `sender.test`: the sender's mailbox is the Dovecot user's Maildir, so the reports
  Postfix sends back land where the service polls;
- `rcpt.test`: `full@rcpt.test` is an mbox already over `virtual_mailbox_limit`
  (Postfix answers "mailbox full", 5.2.2); any other address is unknown (5.1.1).

Debian's `postfix` package (`apt-get install postfix`; .ci/run installs it). Started as
root (postfix(1) drops to `mail_owner`); a non-root run cannot start it.
"""

import os
import shutil
import subprocess
import tempfile
import textwrap
import time
from pathlib import Path

from tests.support.ports import free_port, wait_for_port

POSTFIX = shutil.which("postfix") or (
    "/usr/sbin/postfix" if Path("/usr/sbin/postfix").exists() else None
)
MAILBOX_LIMIT = 20_000  # bytes; full@rcpt.test starts above it

# Postfix's services as Debian's master.cf lists them, none chrooted (the throwaway
# queue has no copies of /etc files).
_SERVICES = """\
pickup    unix  n       -       n       60      1       pickup
cleanup   unix  n       -       n       -       0       cleanup
qmgr      unix  n       -       n       300     1       qmgr
tlsmgr    unix  -       -       n       1000?   1       tlsmgr
rewrite   unix  -       -       n       -       -       trivial-rewrite
bounce    unix  -       -       n       -       0       bounce
defer     unix  -       -       n       -       0       bounce
trace     unix  -       -       n       -       0       bounce
verify    unix  -       -       n       -       1       verify
flush     unix  n       -       n       1000?   0       flush
proxymap  unix  -       -       n       -       -       proxymap
proxywrite unix -       -       n       -       1       proxymap
smtp      unix  -       -       n       -       -       smtp
relay     unix  -       -       n       -       -       smtp
showq     unix  n       -       n       -       -       showq
error     unix  -       -       n       -       -       error
retry     unix  -       -       n       -       -       error
discard   unix  -       -       n       -       -       discard
local     unix  -       n       n       -       -       local
virtual   unix  -       n       n       -       -       virtual
lmtp      unix  -       -       n       -       -       lmtp
anvil     unix  -       -       n       -       1       anvil
scache    unix  -       -       n       -       1       scache
postlog   unix-dgram n  -       n       -       1       postlogd
"""


class Postfix:
    def __init__(self, *, dovecot, sender: tuple[str, str]):
        address, user = sender
        self.root = Path(tempfile.mkdtemp(prefix="postfix-"))
        self.root.chmod(0o755)
        self.port = free_port()
        self.host = "127.0.0.1"
        self.sender = address
        (self.root / "queue").mkdir()
        (self.root / "data").mkdir()
        shutil.chown(self.root / "data", "postfix", "postfix")
        rcpt = Path(dovecot.home) / "rcpt"
        rcpt.mkdir(exist_ok=True)
        full = rcpt / "full"
        full.write_text("From old@rcpt.test  Mon Jan  5 10:00:00 2026\n\n" + "x" * MAILBOX_LIMIT)
        for path in (rcpt, full):
            os.chown(path, dovecot.mail_uid, dovecot.mail_gid)
        maildir = Path(dovecot.home) / user / "Maildir"
        for sub in ("cur", "new", "tmp"):
            (maildir / sub).mkdir(parents=True, exist_ok=True)
        for path in (maildir.parent, maildir, *(maildir / s for s in ("cur", "new", "tmp"))):
            os.chown(path, dovecot.mail_uid, dovecot.mail_gid)
        (self.root / "vmailbox").write_text(
            f"{address} {user}/Maildir/\nfull@rcpt.test rcpt/full\n"
        )
        self._configure(dovecot)
        self.log = self.root / "maillog"
        started = subprocess.run(
            [POSTFIX, "-c", str(self.root), "start"], capture_output=True, text=True, check=False
        )
        try:
            if started.returncode != 0:
                raise RuntimeError(started.stdout + started.stderr)
            wait_for_port(self.port, timeout=20)
        except (RuntimeError, TimeoutError) as exc:
            log = self.log_text()
            self.stop()
            raise RuntimeError(f"postfix did not start: {exc}\n{log}") from None

    def _configure(self, dovecot) -> None:
        main = f"""\
            compatibility_level = 3.6
            queue_directory = {self.root}/queue
            data_directory = {self.root}/data
            maillog_file = {self.root}/maillog
            maillog_file_prefixes = {self.root}
            mail_owner = postfix
            myhostname = mx.postfix.test
            mydomain = postfix.test
            myorigin = sender.test
            inet_interfaces = 127.0.0.1
            inet_protocols = ipv4
            mynetworks = 127.0.0.1/32
            mydestination =
            local_transport = error:no local delivery here
            alias_maps =
            alias_database =
            biff = no
            relayhost =
            default_transport = error:no mail leaves this machine
            virtual_mailbox_domains = sender.test, rcpt.test
            virtual_mailbox_base = {dovecot.home}
            virtual_mailbox_maps = texthash:{self.root}/vmailbox
            virtual_uid_maps = static:{dovecot.mail_uid}
            virtual_gid_maps = static:{dovecot.mail_gid}
            virtual_minimum_uid = 1
            virtual_mailbox_limit = {MAILBOX_LIMIT}
            message_size_limit = {MAILBOX_LIMIT}
            smtpd_reject_unlisted_recipient = no
            smtpd_tls_cert_file = {dovecot.root}/cert.pem
            smtpd_tls_key_file = {dovecot.root}/key.pem
            smtpd_tls_security_level = encrypt
            smtpd_tls_auth_only = yes
            smtpd_sasl_type = dovecot
            smtpd_sasl_path = {dovecot.auth_socket}
            smtpd_sasl_auth_enable = yes
            smtpd_relay_restrictions = permit_sasl_authenticated, reject
            smtpd_recipient_restrictions = permit_sasl_authenticated, reject
            bounce_queue_lifetime = 0
            maximal_queue_lifetime = 1h
            queue_run_delay = 1s
            minimal_backoff_time = 1s
            """
        (self.root / "main.cf").write_text(textwrap.dedent(main))
        listener = (
            f"{self.host}:{self.port} inet n - n - - smtpd\n  -o syslog_name=postfix/submission\n"
        )
        (self.root / "master.cf").write_text(listener + _SERVICES)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace") if self.log.exists() else "(no log)"

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Until the queue is empty: every message delivered or bounced."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            shown = subprocess.run(
                ["postqueue", "-c", str(self.root), "-j"],
                capture_output=True,
                text=True,
                check=False,
            )
            if shown.returncode == 0 and not shown.stdout.strip():
                return
            time.sleep(0.2)
        raise TimeoutError(f"postfix queue not empty:\n{self.log_text()}")

    def stop(self) -> None:
        subprocess.run([POSTFIX, "-c", str(self.root), "stop"], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)
