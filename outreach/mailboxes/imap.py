"""IMAP: the authenticated connection to a mailbox (password or XOAUTH2)."""

import contextlib
import imaplib
import ssl

from django.conf import settings

from config.outbound import GuardedIMAP4, GuardedIMAP4_SSL
from outreach.mailboxes import oauth_tokens
from outreach.models.mailboxes import Security, SmtpCredential


class MailboxUnreachable(Exception):
    """Connecting, logging in or reading failed; recorded on the credential."""


# --- IMAP ------------------------------------------------------------------------------


def imap_connect(credential: SmtpCredential) -> imaplib.IMAP4:
    host = credential.imap_host
    timeout = settings.IMAP_TIMEOUT_SECONDS
    access_token = None
    if credential.uses_oauth:
        try:
            access_token = oauth_tokens.access_token_get(credential=credential)
        except oauth_tokens.TokenError as exc:
            raise MailboxUnreachable(str(exc)) from exc
    if credential.imap_security == Security.SSL:
        port = credential.imap_port or 993
        client: imaplib.IMAP4 = GuardedIMAP4_SSL(
            host, port, ssl_context=ssl.create_default_context(), timeout=timeout
        )
    else:
        port = credential.imap_port or 143
        client = GuardedIMAP4(host, port, timeout=timeout)
    try:
        if credential.imap_security == Security.STARTTLS:
            client.starttls(ssl_context=ssl.create_default_context())
        _imap_login(client, credential, access_token)
    except BaseException:
        # A refused login (or TLS upgrade) closes the connection it opened.
        with contextlib.suppress(OSError, imaplib.IMAP4.error):
            client.shutdown()
        raise
    return client


def _imap_login(
    client: imaplib.IMAP4, credential: SmtpCredential, access_token: str | None
) -> None:
    """LOGIN with the password, or AUTHENTICATE XOAUTH2 with the access token."""
    if access_token is None:
        client.login(credential.imap_username, credential.imap_password)
        return
    response = oauth_tokens.xoauth2_string(
        credential.imap_username or credential.from_email, access_token
    ).encode()
    sent = []

    def respond(_challenge: bytes) -> bytes:
        # The first continuation asks for the response; a second one carries the
        # server's JSON error, answered with an empty line (then it says NO).
        sent.append(True)
        return response if len(sent) == 1 else b""

    try:
        client.authenticate("XOAUTH2", respond)
    except imaplib.IMAP4.error:
        oauth_tokens.access_token_forget(credential=credential)  # refreshed next time
        raise
