"""SMTP: the authenticated connection of a mailbox, and the two failures opening it can
meet. The sending engine, the check of a new mailbox and the responses to replies all
open their connections here, through the outbound guard."""

import contextlib
import smtplib
import ssl

from django.conf import settings

from config.outbound import GuardedSMTP, GuardedSMTP_SSL, OutboundRefused
from outreach.mailboxes import oauth_tokens
from outreach.models.mailboxes import Security, SmtpCredential

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


def smtp_reply_text(code: int, message: bytes | str) -> str:
    if isinstance(message, bytes):
        message = message.decode("utf-8", "replace")
    return f"{code} {message}".strip()[:ERROR_MAX_CHARS]


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
        text = smtp_reply_text(exc.smtp_code, exc.smtp_error)
        raise MailboxError(f"authentication failed: {text}", exc.smtp_code) from exc
    except (smtplib.SMTPNotSupportedError, ssl.SSLError, ssl.CertificateError) as exc:
        smtp_close(conn)
        raise MailboxError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS]) from exc
    except smtplib.SMTPResponseException as exc:
        smtp_close(conn)
        text, code = smtp_reply_text(exc.smtp_code, exc.smtp_error), exc.smtp_code
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


def smtp_close(conn: smtplib.SMTP) -> None:
    try:
        conn.quit()
    except (OSError, smtplib.SMTPException):
        with contextlib.suppress(OSError):
            conn.close()
