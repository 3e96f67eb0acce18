"""A mailbox's secrets kept out of what is shown of it: an SMTP server or a token
endpoint may echo what it was sent into the error text the service records."""

import base64

from config.logs import REDACTED
from outreach.models.mailboxes import SmtpCredential

# The mailbox's secrets an SMTP server or a token endpoint could echo into an error text.
_SECRET_FIELDS = ("smtp_password", "imap_password", "oauth_refresh_token", "oauth_access_token")


def secrets_hidden(text: str, credential: SmtpCredential) -> str:
    """`text` (a recorded error) without the mailbox's secrets, as sent or as AUTH sends
    them (base64): what the API, the clients and the logs may show of it. A secret not
    loaded with `credential` (a send loads only what it logs in with) was not sent, so
    nothing can echo it: it is not read for this."""
    unloaded = credential.get_deferred_fields()
    for name in _SECRET_FIELDS:
        if name in unloaded:
            continue
        secret = getattr(credential, name, "")
        if not secret or len(secret) < 4:
            continue
        for form in (secret, base64.b64encode(secret.encode()).decode()):
            text = text.replace(form, REDACTED)
        if credential.smtp_username and name == "smtp_password":
            plain = f"\0{credential.smtp_username}\0{secret}".encode()
            text = text.replace(base64.b64encode(plain).decode(), REDACTED)
    return text
