"""A REAL SMTP server (aiosmtpd) on 127.0.0.1, for tests that send mail.

Fixture `smtp_sink`: a factory starting a sink on a free port, in a thread, stopped
when the test ends.

    sink = smtp_sink()                        # plain SMTP, any login accepted
    sink = smtp_sink(username="u", password="p")   # AUTH required; others get 535
    sink = smtp_sink(xoauth2=check)           # AUTH XOAUTH2 only, required; check(user,
                                              # bearer token) -> bool (an OAuthProvider's
                                              # access_token_valid); sink.xoauth2_logins
    sink = smtp_sink(smtputf8=True)           # offer SMTPUTF8 (non-ASCII local parts)
    sink = smtp_sink(host="10.0.0.1")         # listen on another local address
                                              # (default 127.0.0.1)
    sink = smtp_sink(tls="starttls")          # or "ssl" (implicit TLS); self-signed
                                              # certificate at sink.ca_file (127.0.0.1)
    sink.reject_rcpt("gone@x.org")            # 550 5.1.1 to RCPT TO for that address
    sink.reject_rcpt("busy@x.org", "451 4.7.1 Try again later", times=1)
    sink.reject_data("554 5.7.1 Rejected as spam", times=1)
    sink.hold_data("slow@x.org")              # record the message, then never answer
                                              # DATA until sink.release()
    sink.drop_after_data("cut@x.org")         # record the message, then close the
                                              # connection instead of answering DATA
    sink.wait_for(3)                          # block until 3 messages were accepted
    sink.messages                             # [Received(mail_from, rcpt_tos, data, message,
                                              #  at, peer)]: `at` is the unix time of the
                                              #  accept, `peer` the client's address

A slow or dead peer, as real mail servers are (also settable on a running sink):

    sink = smtp_sink(reply_delay=0.05)        # every reply (banner, each EHLO, MAIL,
                                              # RCPT, DATA's 354, QUIT...) 50 ms late
    sink = smtp_sink(reply_delay=0.05, data_delay=0.2)   # and the reply to the end of
                                              # DATA 200 ms late (default: reply_delay)
    sink = smtp_sink(hang=True)               # accept the TCP connection, never say a
                                              # word (not even the banner) until stop()
    sink = smtp_sink(reply_delay_range=(0.05, 0.5))   # each reply (the end of DATA's
                                              # too, unless data_delay) after its own
                                              # delay drawn uniformly from the range
    sink = smtp_sink(hang_data_from={"a@x.org"})   # never answer the end of DATA of a
                                              # message from these senders (not recorded,
                                              # not logged) until stop()

Delays are asyncio sleeps in the server's event loop: one slow session never holds up
another, and hundreds of concurrent sessions are fine (listen backlog 1024).

Run as a script (`python -m tests.support.smtp --port N`) it accepts everything as fast
as it can without keeping anything (the benchmark's peer); `--reply-delay`,
`--data-delay` and `--hang` as above, `--reply-delay-range MIN,MAX` (seconds, drawn per
reply), `--hang-data-from FILE` (one sender address a line), `--log FILE` appends a line
per accepted message: `<unix time of the 250> <mail from> <first recipient>`.
"""

import argparse
import asyncio
import base64
import binascii
import datetime
import email
import email.policy
import ipaddress
import json
import random
import socket
import ssl
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import MISSING, SMTP, AuthResult

from tests.support.ports import free_port


class _SMTP(SMTP):
    """aiosmtpd's SMTP session, with the sink's latency options (its event_handler is the
    SmtpSink): each reply waits `reply_delay` first, once per reply (not per line of a
    multi-line EHLO reply); the reply to the end of DATA waits in handle_DATA instead
    (`data_delay`); with `hang`, the session says nothing at all."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._in_reply = False  # the previous line was a continuation ("250-...")
        self.skip_next_delay = False  # handle_DATA already waited for this reply

    async def _handle_client(self) -> None:
        if self.event_handler.hang:
            # Connected, then silence: no banner, no reply, until the sink stops (its
            # loop cancels this task). The connection is closed then: since Python 3.12
            # aiosmtpd's stop waits for every connection to close (Server.wait_closed),
            # and a silent session's was closed only by aiosmtpd's idle timeout, 300 s on.
            try:
                while True:
                    await asyncio.sleep(3600)
            finally:
                if self.transport is not None:
                    self.transport.close()
        await super()._handle_client()

    async def push(self, status):
        if self.skip_next_delay:
            self.skip_next_delay = False
        elif not self._in_reply:
            delay = self.event_handler.reply_delay_draw()
            if delay:
                await asyncio.sleep(delay)
        line = status if isinstance(status, bytes) else status.encode("utf-8", "replace")
        self._in_reply = line[3:4] == b"-"
        await super().push(status)


class _Controller(Controller):
    def factory(self):
        # Tests log in over plain SMTP on loopback on purpose (security mode "none").
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="Requiring AUTH while not requiring TLS")
            return _SMTP(self.handler, **self.SMTP_kwargs)

    def _create_server(self):
        # asyncio's default backlog (100) drops connections when hundreds of clients
        # connect at once (the latency benchmarks); the kernel caps it at somaxconn.
        return self.loop.create_server(
            self._factory_invoker,
            host=self.hostname,
            port=self.port,
            ssl=self.ssl_context,
            backlog=1024,
        )

    def _trigger_server(self):
        if self.handler.hang:  # no banner to read: a connection makes the session
            socket.create_connection((self.hostname, self.port), 1.0).close()
            return
        super()._trigger_server()


@dataclass(frozen=True)
class Received:
    mail_from: str
    rcpt_tos: list
    data: bytes
    # time.time() when the sink took the whole message, before its reply to the end of DATA.
    at: float = 0.0
    peer: str = ""  # the client's address: which host sent it

    @property
    def message(self) -> email.message.EmailMessage:
        return email.message_from_bytes(self.data, policy=email.policy.default)


def self_signed_certificate(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 and localhost, and its key (PEM files)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "smtp-cert.pem", directory / "smtp-key.pem"
    cert_path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Script:
    """Replies to give instead of 250, keyed by address (None: any), each a number of times."""

    def __init__(self):
        self._lock = threading.Lock()
        self._items: list[list] = []  # [address or None, reply, remaining or None]

    def add(self, address, reply: str, times) -> None:
        with self._lock:
            self._items.append([address.lower() if address else None, reply, times])

    def take(self, address: str | None) -> str | None:
        with self._lock:
            for item in self._items:
                if item[0] is None or (address and item[0] == address.lower()):
                    if item[2] is not None:
                        item[2] -= 1
                        if item[2] <= 0:
                            self._items.remove(item)
                    return item[1]
        return None


class SmtpSink:
    def __init__(
        self,
        *,
        username: str | None = None,
        password: str | None = None,
        tls: str | None = None,
        directory: Path | None = None,
        record: bool = True,
        smtputf8: bool = False,
        port: int | None = None,
        host: str = "127.0.0.1",
        reply_delay: float = 0.0,
        data_delay: float | None = None,
        hang: bool = False,
        log: Path | None = None,
        xoauth2=None,
        reply_delay_range: tuple[float, float] | None = None,
        hang_data_from=(),
    ):
        self.reply_delay = reply_delay
        # (min, max): each reply waits its own uniform draw instead of reply_delay.
        self.reply_delay_range = reply_delay_range
        self.data_delay = data_delay  # None: the end of DATA waits like any reply
        self.hang = hang
        # Senders whose end of DATA is never answered (until stop()).
        self.hang_data_from = {address.lower() for address in hang_data_from}
        self._log = open(log, "a", buffering=1) if log else None  # noqa: SIM115 (stop())
        self.messages: list[Received] = []
        self.auth_attempts = 0
        self._record = record
        self._rcpt = _Script()
        self._data = _Script()
        self._hold: set[str] = set()
        self._drop: set[str] = set()
        self._released = threading.Event()
        self._cond = threading.Condition()
        self.host = host
        self.port = port or free_port()
        self.ca_file: Path | None = None
        kwargs: dict = {"enable_SMTPUTF8": smtputf8}
        self._xoauth2 = xoauth2
        self.xoauth2_logins: list[tuple[str, bool]] = []  # (user, accepted)
        if xoauth2 is not None:
            # As Gmail and Microsoft 365: XOAUTH2 only (no password mechanism offered).
            self._credentials = None
            kwargs.update(
                auth_required=True,
                auth_require_tls=False,
                auth_exclude_mechanism=["PLAIN", "LOGIN"],
            )
        elif username is not None:
            self._credentials = (username, password or "")
            kwargs.update(
                auth_required=True, auth_require_tls=False, authenticator=self._authenticate
            )
        else:
            self._credentials = None
            kwargs.update(auth_require_tls=False, authenticator=self._authenticate)
        if xoauth2 is None:
            kwargs["auth_exclude_mechanism"] = ["XOAUTH2"]
        if tls:
            cert, key = self_signed_certificate(directory or Path("."))
            self.ca_file = cert
            context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            context.load_cert_chain(cert, key)
            if tls == "ssl":
                kwargs["ssl_context"] = context
            else:
                kwargs.update(tls_context=context, require_starttls=True)
        self._controller = _Controller(self, hostname=self.host, port=self.port, **kwargs)

    # --- scripting ---
    def reject_rcpt(self, address: str, reply: str = "550 5.1.1 No such user here", times=None):
        self._rcpt.add(address, reply, times)

    def reject_data(self, reply: str = "554 5.7.1 Message rejected", *, address=None, times=None):
        self._data.add(address, reply, times)

    def hold_data(self, address: str) -> None:
        self._hold.add(address.lower())

    def drop_after_data(self, address: str) -> None:
        """Take the whole message for `address` (it is recorded), then close the
        connection instead of answering the final dot."""
        self._drop.add(address.lower())

    def release(self) -> None:
        self._released.set()

    def wait_for(self, count: int, *, timeout: float = 20.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len(self.messages) < count:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"SMTP sink got {len(self.messages)} messages, expected {count}"
                    )
                self._cond.wait(remaining)
            return list(self.messages)

    def to(self, address: str) -> list[Received]:
        return [m for m in self.messages if address.lower() in (r.lower() for r in m.rcpt_tos)]

    def reply_delay_draw(self) -> float:
        """The delay before the next reply: reply_delay, or a draw from the range."""
        if self.reply_delay_range is not None:
            return random.uniform(*self.reply_delay_range)  # noqa: S311 (a test peer)
        return self.reply_delay

    # --- aiosmtpd handler hooks ---
    def _authenticate(self, server, session, envelope, mechanism, auth_data):
        self.auth_attempts += 1
        if self._credentials is None:
            return AuthResult(success=True)
        login = getattr(auth_data, "login", b"") or b""
        password = getattr(auth_data, "password", b"") or b""
        ok = (login.decode(), password.decode()) == self._credentials
        return AuthResult(success=ok, handled=False)

    async def auth_XOAUTH2(self, server, args):  # noqa: N802 (aiosmtpd's hook naming)
        """SASL XOAUTH2: `user=<address>^Aauth=Bearer <token>^A^A`, base64. A refused
        token gets Gmail's answer: a 334 with a JSON error, then 535 after the client's
        empty line."""
        self.auth_attempts += 1
        if len(args) == 2:
            try:
                blob = base64.b64decode(args[1], validate=True)
            except binascii.Error:
                return AuthResult(success=False, handled=False)
        else:
            blob = await server.challenge_auth("")
            if blob is MISSING:
                return AuthResult(success=False, handled=False)
        fields = dict(
            part.split("=", 1)
            for part in blob.decode("utf-8", "replace").split("\x01")
            if "=" in part
        )
        user = fields.get("user", "")
        token = fields.get("auth", "").removeprefix("Bearer ")
        ok = bool(self._xoauth2(user, token))
        self.xoauth2_logins.append((user, ok))
        if ok:
            return AuthResult(success=True, auth_data=user)
        error = json.dumps(
            {"status": "401", "schemes": "Bearer", "scope": "https://mail.google.com/"}
        )
        await server.challenge_auth(error)
        return AuthResult(
            success=False, handled=False, message="535 5.7.8 Username and Password not accepted"
        )

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options):
        reply = self._rcpt.take(address)
        if reply:
            return reply
        envelope.rcpt_tos.append(address)
        return "250 OK"

    async def handle_DATA(self, server, session, envelope):
        delay = self.reply_delay_draw() if self.data_delay is None else self.data_delay
        if delay:
            await asyncio.sleep(delay)
        if isinstance(server, _SMTP):
            server.skip_next_delay = True  # this reply has waited its delay
        if (envelope.mail_from or "").lower() in self.hang_data_from:
            # The whole message came in; its end of DATA is never answered. The client
            # gives up on its own timeout; the session waits here until stop().
            while not self._released.is_set():
                await asyncio.sleep(0.5)
            return "421 4.3.0 Shutting down"
        rcpt = envelope.rcpt_tos[0] if envelope.rcpt_tos else None
        reply = self._data.take(rcpt)
        if reply:
            return reply
        received = Received(
            envelope.mail_from,
            list(envelope.rcpt_tos),
            bytes(envelope.content),
            time.time(),
            session.peer[0] if session.peer else "",
        )
        held = rcpt is not None and rcpt.lower() in self._hold
        if self._record:
            with self._cond:
                self.messages.append(received)
                self._cond.notify_all()
        if rcpt is not None and rcpt.lower() in self._drop:
            server.transport.close()  # the line drops after the last byte
            return None
        if held:
            while not self._released.is_set():
                await asyncio.sleep(0.05)
            return "421 4.3.0 Shutting down"
        if self._log is not None:
            self._log.write(f"{time.time():.6f} {envelope.mail_from} {rcpt}\n")
        return "250 2.0.0 Queued"

    def start(self) -> "SmtpSink":
        self._controller.start()
        return self

    def stop(self) -> None:
        self._released.set()
        self._controller.stop()
        if self._log is not None:
            self._log.close()


@pytest.fixture
def smtp_sink(tmp_path):
    sinks: list[SmtpSink] = []

    def start(**kwargs) -> SmtpSink:
        sink = SmtpSink(directory=tmp_path, **kwargs).start()
        sinks.append(sink)
        return sink

    yield start
    for sink in sinks:
        sink.stop()


def _seconds_range(text: str) -> tuple[float, float]:
    low, sep, high = text.partition(",")
    try:
        bounds = (float(low), float(high))
    except ValueError:
        raise argparse.ArgumentTypeError(f"MIN,MAX in seconds, not {text!r}") from None
    if not sep or not 0 <= bounds[0] <= bounds[1]:
        raise argparse.ArgumentTypeError(f"MIN,MAX with 0 <= MIN <= MAX, not {text!r}")
    return bounds


def _addresses(path: Path | None) -> list[str]:
    if path is None:
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.strip()]


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Accept every message, keep nothing.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--reply-delay", type=float, default=0.0, help="seconds before a reply")
    parser.add_argument(
        "--data-delay", type=float, default=None, help="seconds before the end-of-DATA reply"
    )
    parser.add_argument("--hang", action="store_true", help="accept, then never answer")
    parser.add_argument(
        "--reply-delay-range",
        type=_seconds_range,
        default=None,
        metavar="MIN,MAX",
        help="each reply after its own delay drawn uniformly from MIN..MAX seconds",
    )
    parser.add_argument(
        "--hang-data-from",
        type=Path,
        default=None,
        metavar="FILE",
        help="never answer the end of DATA of messages from the senders in FILE (one a line)",
    )
    parser.add_argument("--log", type=Path, help="append a line per accepted message")
    args = parser.parse_args()
    SmtpSink(
        record=False,
        smtputf8=True,
        port=args.port,
        reply_delay=args.reply_delay,
        data_delay=args.data_delay,
        hang=args.hang,
        log=args.log,
        reply_delay_range=args.reply_delay_range,
        hang_data_from=_addresses(args.hang_data_from),
    ).start()
    threading.Event().wait()
