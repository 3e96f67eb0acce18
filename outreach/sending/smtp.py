"""SMTP: the transaction of one message and its failures, over a connection opened by
outreach.mailboxes.smtp. The four kinds of failure a send meets are named here, two of them
(the mailbox's, and a temporary one) being those opening the connection can raise."""

import smtplib

from outreach.mailboxes.smtp import (
    ERROR_MAX_CHARS,
    MailboxError,
    SendFailure,
    TemporaryError,
    smtp_reply_text,
)

__all__ = [
    "ERROR_MAX_CHARS",
    "UNSEEN_REPLY_NOTE",
    "MailboxError",
    "OutcomeUnknown",
    "PermanentError",
    "SendFailure",
    "TemporaryError",
    "smtp_error_classify",
    "smtp_transaction",
]

# --- failures -------------------------------------------------------------------------------


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
    return code, smtp_reply_text(code, reply)


def smtp_error_classify(exc: Exception) -> Exception:
    """Map an smtplib failure during one message's transaction to our three kinds."""
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, message = next(iter(exc.recipients.values()))
        text = smtp_reply_text(code, message)
        return PermanentError(text, code) if code >= 500 else TemporaryError(text, code)
    if isinstance(exc, smtplib.SMTPSenderRefused):
        text = smtp_reply_text(exc.smtp_code, exc.smtp_error)
        if exc.smtp_code >= 500:
            return MailboxError(f"sender refused: {text}", exc.smtp_code)
        return TemporaryError(text, exc.smtp_code)
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return TemporaryError(f"connection lost: {exc}"[:ERROR_MAX_CHARS])
    if isinstance(exc, smtplib.SMTPResponseException):  # DATA and others
        text, code = smtp_reply_text(exc.smtp_code, exc.smtp_error), exc.smtp_code
        return PermanentError(text, code) if code >= 500 else TemporaryError(text, code)
    if isinstance(exc, (OSError, smtplib.SMTPException)):
        return TemporaryError(f"{type(exc).__name__}: {exc}"[:ERROR_MAX_CHARS])
    raise exc
