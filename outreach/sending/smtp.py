"""SMTP: the connection of a mailbox, the transaction of one message, its failures."""

import contextlib
import smtplib
import ssl

from django.conf import settings

from config.outbound import GuardedSMTP, GuardedSMTP_SSL, OutboundRefused
from outreach.mailboxes import oauth_tokens
from outreach.mailboxes.models import Security, SmtpCredential

ERROR_MAX_CHARS = 1000


# --- failures -------------------------------------------------------------------------------


class SendFailure(Exception):
    """A failure with the SMTP server's reply code when there was one (the attempt's
    `reply_code`); its text is the attempt's `reply_text` and the `last_error` shown."""

    def __init__(self, text: str, code: int | None = None):
        super().__init__(text)
        self.code = code


class MailboxError(SendFailure):
    """The mailbox cannot send at all (authentication, TLS, sender refused): not the
    recipient's fault, so never a bounce; the batch waits and retries."""


class TemporaryError(SendFailure):
    """A 4xx reply or a broken connection: this step is retried later."""


class PermanentError(SendFailure):
    """A 5xx reply to RCPT or DATA: the address bounced."""


class OutcomeUnknown(Exception):
    """The message and its final dot went out, and no reply came (the connection
    dropped, or the reply timed out): the server may have accepted it."""


UNSEEN_REPLY_NOTE = (
    "The SMTP server's reply to this message was never seen (the connection dropped, the "
    "reply timed out, or the worker was lost); it is counted as sent and not sent again "
    "(it could arrive twice)."
)


def smtp_transaction(
    conn: smtplib.SMTP, sender: str, recipient: str, data: bytes, options
) -> tuple[int, str]:
    """MAIL, RCPT and DATA for one recipient, as smtplib's sendmail runs them, except
    that a reply to the final dot that never comes raises OutcomeUnknown instead of
    looking like a connection that failed before the message was sent. Returns the
    server's reply to the final dot (code, text)."""
    conn.ehlo_or_helo_if_needed()
    mail_options = list(options)
    if conn.does_esmtp and conn.has_extn("size"):
        mail_options.append(f"size={len(data)}")
    code, reply = conn.mail(sender, mail_options)
    if code != 250:
        conn.close() if code == 421 else conn.rset()
        raise smtplib.SMTPSenderRefused(code, reply, sender)
    code, reply = conn.rcpt(recipient)
    if code not in (250, 251):
        conn.close() if code == 421 else conn.rset()
        raise smtplib.SMTPRecipientsRefused({recipient: (code, reply)})
    conn.putcmd("data")
    code, reply = conn.getreply()
    if code != 354:
        raise smtplib.SMTPDataError(code, reply)
    body = smtplib._quote_periods(data)  # type: ignore[attr-defined]  # sendmail's dot-stuffing
    if body[-2:] != b"\r\n":
        body += b"\r\n"
    conn.send(body + b".\r\n")
    try:
        code, reply = conn.getreply()
    except (smtplib.SMTPServerDisconnected, OSError) as exc:
        raise OutcomeUnknown(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc
    if code != 250:
        raise smtplib.SMTPDataError(code, reply)
    return code, _reply_text(code, reply)


def _reply_text(code: int, message) -> str:
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return f"{code} {message}".strip()[:ERROR_MAX_CHARS]


def smtp_error_classify(exc: Exception) -> Exception:
    """Map an smtplib failure during one message's transaction to our three kinds."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, message = next(iter(exc.recipients.values()))
        text = _reply_text(code, message)
        return PermanentError(text, code) if code >= 500 else TemporaryError(text, code)
    if isinstance(exc, smtplib.SMTPSenderRefused):
        text = _reply_text(exc.smtp_code, exc.smtp_error)
        if exc.smtp_code >= 500:
            return MailboxError(f"sender refused: {text}", exc.smtp_code)
        return TemporaryError(text, exc.smtp_code)
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return TemporaryError(f"connection lost: {exc}"[:ERROR_MAX_CHARS])
    if isinstance(exc, smtplib.SMTPResponseException):  # DATA and others
        text, code = _reply_text(exc.smtp_code, exc.smtp_error), exc.smtp_code
        return PermanentError(text, code) if code >= 500 else TemporaryError(text, code)
    if isinstance(exc, (OSError, smtplib.SMTPException)):
        return TemporaryError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS])
    raise exc


# --- the connection -------------------------------------------------------------------------


def _tls_context() -> ssl.SSLContext:
    context = ssl.create_default_context()
    if settings.SENDING_SMTP_CA_FILE:
        context.load_verify_locations(cafile=settings.SENDING_SMTP_CA_FILE)
    return context


def smtp_connect(credential: SmtpCredential) -> smtplib.SMTP:
    """An authenticated connection per the credential's security mode, with the timeout
    on connect and every command. MailboxError for what retrying soon will not fix
    (authentication, TLS), TemporaryError when the server cannot be reached."""
    if settings.SMTP_REQUIRE_LOGIN and not credential.logs_in:
        # A mailbox stored before the rule, or while it was off: it waits like any mailbox
        # failure (never a bounce) until it is given a login.
        raise MailboxError(
            "login required: this service sends only through mailboxes that log in "
            "(SMTP_REQUIRE_LOGIN); set smtp_username and smtp_password"
        )
    access_token = _access_token(credential) if credential.uses_oauth else None
    conn = _smtp_open(credential)
    try:
        _smtp_login(conn, credential, access_token)
        return conn
    except smtplib.SMTPAuthenticationError as exc:
        smtp_close(conn)
        if access_token is not None:
            oauth_tokens.access_token_forget(credential=credential)  # refreshed next time
        text = _reply_text(exc.smtp_code, exc.smtp_error)
        raise MailboxError(f"authentication failed: {text}", exc.smtp_code) from exc
    except (smtplib.SMTPNotSupportedError, ssl.SSLError, ssl.CertificateError) as exc:
        smtp_close(conn)
        raise MailboxError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc
    except smtplib.SMTPResponseException as exc:
        smtp_close(conn)
        text, code = _reply_text(exc.smtp_code, exc.smtp_error), exc.smtp_code
        if code >= 500:
            raise MailboxError(text, code) from exc
        raise TemporaryError(text, code) from exc
    except (OSError, smtplib.SMTPException) as exc:
        smtp_close(conn)
        raise TemporaryError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc


def _access_token(credential: SmtpCredential) -> str:
    """The OAuth mailbox's access token, read before connecting: a refresh may wait on
    the token endpoint. A mailbox that needs re-authorization, or a token endpoint that
    failed, waits like a mailbox failure (never a bounce, no attempt counted)."""
    try:
        return oauth_tokens.access_token_get(credential=credential)
    except oauth_tokens.TokenError as exc:
        raise MailboxError(str(exc)[:ERROR_MAX_CHARS]) from exc


def _smtp_open(credential: SmtpCredential) -> smtplib.SMTP:
    """The connection to the mailbox's server (TLS from the start in SSL mode)."""
    timeout = settings.SENDING_SMTP_TIMEOUT_SECONDS
    host, port = credential.smtp_host, credential.smtp_port
    try:
        # Through the outbound guard: a host resolving to a refused address is a mailbox
        # failure (the batch waits), never a bounce.
        if credential.smtp_security == Security.SSL:
            return GuardedSMTP_SSL(host, port, timeout=timeout, context=_tls_context())
        return GuardedSMTP(host, port, timeout=timeout)
    except OutboundRefused as exc:
        raise MailboxError(f"refused: {exc}"[:ERROR_MAX_CHARS]) from exc
    except (ssl.SSLError, ssl.CertificateError) as exc:
        raise MailboxError(f"TLS failed: {exc}"[:ERROR_MAX_CHARS]) from exc
    except (OSError, smtplib.SMTPException) as exc:
        raise TemporaryError(f"cannot connect to {host}:{port}: {exc}"[:ERROR_MAX_CHARS]) from exc


def _smtp_login(conn: smtplib.SMTP, credential: SmtpCredential, access_token: str | None) -> None:
    """EHLO, STARTTLS in that mode, then XOAUTH2 with an access token, or LOGIN with
    the mailbox's username (none: no authentication)."""
    conn.ehlo()
    if credential.smtp_security == Security.STARTTLS:
        conn.starttls(context=_tls_context())
        conn.ehlo()
    if access_token is not None:
        response = oauth_tokens.xoauth2_string(oauth_tokens.oauth_user(credential), access_token)
        # The server's JSON error after a refused token is answered with an empty line
        # (the SASL exchange's end); then it says 535.
        conn.auth(
            "XOAUTH2",
            lambda challenge=None: response if challenge is None else "",
            initial_response_ok=True,
        )
    elif credential.smtp_username:
        conn.login(credential.smtp_username, credential.smtp_password)


def smtp_close(conn) -> None:
    try:
        conn.quit()
    except (OSError, smtplib.SMTPException):
        with contextlib.suppress(OSError):
            conn.close()
