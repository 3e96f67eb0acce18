"""Check a mailbox at once: connect and log in to its SMTP server (and its IMAP server
when set), the way the sending engine and the intake poller do, and say what failed.

Used by `POST /smtp_credentials/:id/verify` and by the create of a credential. Nothing is
sent, read or recorded: the result is only returned.
"""

import contextlib
import imaplib
import smtplib
import socket
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import Any

from django.conf import settings
from django.db import connections

from config.db import connection_release
from outreach.mailboxes import oauth_tokens
from outreach.mailboxes.imap import imap_connect
from outreach.mailboxes.smtp import smtp_connect
from outreach.models.mailboxes import SmtpCredential

ERROR_MAX_CHARS = 500


def _smtp_check(credential: SmtpCredential) -> None:
    conn = smtp_connect(credential)
    try:
        conn.quit()
    except (OSError, smtplib.SMTPException):
        with contextlib.suppress(OSError):
            conn.close()


def _imap_check(credential: SmtpCredential) -> None:
    client = imap_connect(credential)
    with contextlib.suppress(OSError, imaplib.IMAP4.error):
        client.logout()


def _in_thread(check: Callable[[SmtpCredential], object], credential: SmtpCredential) -> None:
    """A check in its own thread. An OAuth mailbox whose access token the server
    refuses forgets it (a database write): the thread's connection is closed after."""
    try:
        check(credential)
    finally:
        connections.close_all()


def _describe(exc: BaseException, timeout: float) -> str:
    if isinstance(exc, socket.timeout | TimeoutError):
        return f"timed out after {timeout:g} s"
    if isinstance(exc, imaplib.IMAP4.error) and exc.args and isinstance(exc.args[0], bytes):
        # imaplib puts the server's reply in as bytes: b'[AUTHENTICATIONFAILED] ...'
        return f"IMAP: {exc.args[0].decode('utf-8', 'replace')}"[:ERROR_MAX_CHARS]
    text = str(exc) or type(exc).__name__
    if isinstance(exc, OSError | imaplib.IMAP4.error):
        text = f"{type(exc).__name__}: {text}"
    return text[:ERROR_MAX_CHARS]


def credential_verify(*, credential: SmtpCredential) -> dict[str, Any]:
    """{smtp: {ok, error}, imap: {ok, error} or None when the mailbox has no IMAP host}.

    Both checks run at once, and the answer comes within MAILBOX_VERIFY_TIMEOUT_SECONDS
    whatever the servers do: a check still waiting then is reported as timed out (its
    thread ends by itself on its socket timeout).
    """
    if credential.is_simulator:  # nothing to connect to: it never connects
        return {"smtp": {"ok": True, "error": None}, "imap": None}
    checks = {"smtp": (_smtp_check, settings.SENDING_SMTP_TIMEOUT_SECONDS)}
    if credential.imap_host:
        checks["imap"] = (_imap_check, settings.IMAP_TIMEOUT_SECONDS)
    if credential.uses_oauth:
        # One access token for both checks, fetched (refreshed if need be) here: the
        # checks' threads then only talk to the mail servers.
        try:
            oauth_tokens.access_token_get(credential=credential)
        except oauth_tokens.TokenError as exc:
            failed = {"ok": False, "error": str(exc)[:ERROR_MAX_CHARS]}
            return {"smtp": failed, "imap": failed if "imap" in checks else None}
    deadline = settings.MAILBOX_VERIFY_TIMEOUT_SECONDS
    # The request waits on mail servers now: its pooled database connection goes back
    # meanwhile (nothing without a pool).
    connection_release()
    executor = ThreadPoolExecutor(max_workers=len(checks), thread_name_prefix="mailbox-verify")
    futures = {
        name: executor.submit(_in_thread, check, credential) for name, (check, _) in checks.items()
    }
    wait(futures.values(), timeout=deadline)
    executor.shutdown(wait=False)
    result: dict[str, Any] = {"smtp": None, "imap": None}
    for name, future in futures.items():
        if not future.done():
            result[name] = {"ok": False, "error": f"no answer within {deadline:g} s"}
        elif (error := future.exception()) is not None:
            timeout = checks[name][1]
            result[name] = {"ok": False, "error": _describe(error, timeout)}
        else:
            result[name] = {"ok": True, "error": None}
    return result
