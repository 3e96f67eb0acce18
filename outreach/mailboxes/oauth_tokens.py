"""OAuth access tokens: read, refresh under a lease, forget; the XOAUTH2 string."""

import logging
import time
from datetime import datetime

import requests
from authlib.integrations.requests_client import OAuthError
from django.db.models import Q
from django.utils import timezone

from config.db import connection_release
from outreach.mailboxes.oauth import (
    ERROR_MAX_CHARS,
    REFRESH_LEASE,
    REFRESH_MARGIN,
    REFRESH_POLL_SECONDS,
    TOKEN_TIMEOUT_SECONDS,
    Status,
    token_expires_at,
)
from outreach.mailboxes.oauth_providers import PROVIDER_BY_AUTH_METHOD, oauth_session
from outreach.models.mailboxes import SmtpCredential

logger = logging.getLogger(__name__)


# --- 3. access tokens -----------------------------------------------------------------


class TokenError(Exception):
    """No access token now; the message is recorded on the credential."""


class ReauthorizationRequired(TokenError):
    """The provider refused the refresh token: only the mailbox's owner signing in again
    (POST /smtp_credentials/oauth) connects it again."""


class TokenEndpointUnavailable(TokenError):
    """The token endpoint failed (5xx, network, another error): retried later."""


def xoauth2_string(user: str, access_token: str) -> str:
    """The SASL XOAUTH2 initial response (before base64)."""
    return f"user={user}\x01auth=Bearer {access_token}\x01\x01"


def oauth_user(credential: SmtpCredential) -> str:
    return credential.smtp_username or credential.from_email


def _fresh(credential: SmtpCredential, now: datetime) -> bool:
    expires_at = credential.oauth_access_token_expires_at
    return (
        bool(credential.oauth_access_token)
        and expires_at is not None
        and (expires_at - REFRESH_MARGIN > now)
    )


_TOKEN_STATE = ["oauth_status", "oauth_access_token", "oauth_access_token_expires_at"]


def access_token_get(*, credential: SmtpCredential) -> str:
    """A valid access token for the mailbox's XOAUTH2 login (module docstring, 3).
    ReauthorizationRequired or TokenEndpointUnavailable otherwise."""
    waited_until = time.monotonic() + REFRESH_LEASE.total_seconds()
    while True:
        now = timezone.now()
        if credential.oauth_status == Status.REAUTHORIZATION_REQUIRED:
            raise ReauthorizationRequired(
                "The mailbox needs to be re-authorized: connect it again with "
                "POST /smtp_credentials/oauth."
            )
        if _fresh(credential, now):
            return credential.oauth_access_token
        lease = now + REFRESH_LEASE
        taken = SmtpCredential.objects.filter(
            Q(oauth_refreshing_until__isnull=True) | Q(oauth_refreshing_until__lte=now),
            pk=credential.pk,
        ).update(oauth_refreshing_until=lease)
        if taken:
            # Another worker may have refreshed between our read and the lease.
            credential.refresh_from_db(fields=[*_TOKEN_STATE, "oauth_refresh_token"])
            if _fresh(credential, now) or credential.oauth_status != Status.CONNECTED:
                _lease_release(credential, lease)
                continue
            return _refresh(credential, lease)
        # Another worker is refreshing this mailbox: its result is stored in a moment.
        if time.monotonic() > waited_until:
            raise TokenEndpointUnavailable(
                "Another refresh of this mailbox's access token did not finish in time."
            )
        connection_release()
        time.sleep(REFRESH_POLL_SECONDS)
        credential.refresh_from_db(fields=_TOKEN_STATE)


def _lease_release(credential: SmtpCredential, lease: datetime) -> None:
    SmtpCredential.objects.filter(pk=credential.pk, oauth_refreshing_until=lease).update(
        oauth_refreshing_until=None
    )


def _refresh(credential: SmtpCredential, lease: datetime) -> str:
    """Refresh holding the lease; every outcome is written only while the lease is ours
    (a re-authorization meanwhile clears it, and its tokens win)."""
    refresh_token = credential.oauth_refresh_token
    tokens = _tokens_request(credential, lease, refresh_token)
    access_token = tokens.get("access_token")
    if not access_token:
        _lease_release(credential, lease)
        raise TokenEndpointUnavailable("The token endpoint's answer carried no access token.")
    now = timezone.now()
    expires_at = token_expires_at(tokens, now)
    changes = {
        "oauth_access_token": access_token,
        "oauth_access_token_expires_at": expires_at,
        "oauth_refreshing_until": None,
    }
    if tokens.get("refresh_token") and tokens["refresh_token"] != refresh_token:
        changes["oauth_refresh_token"] = tokens["refresh_token"]  # rotated by the provider
    SmtpCredential.objects.filter(pk=credential.pk, oauth_refreshing_until=lease).update(**changes)
    credential.oauth_access_token = access_token
    credential.oauth_access_token_expires_at = expires_at
    return access_token


def _tokens_request(credential: SmtpCredential, lease: datetime, refresh_token: str) -> dict:
    """The token endpoint's answer to the refresh. A failure releases the lease and
    raises TokenEndpointUnavailable, or ReauthorizationRequired (_refresh_refused)."""
    provider = PROVIDER_BY_AUTH_METHOD[credential.auth_method]
    connection_release()  # no database connection held while the token endpoint answers
    try:
        return dict(
            oauth_session(provider).refresh_token(
                provider.token_url, refresh_token=refresh_token, timeout=TOKEN_TIMEOUT_SECONDS
            )
        )
    except OAuthError as exc:
        raise _refresh_refused(credential, lease, exc) from None
    except (requests.RequestException, ValueError) as exc:
        _lease_release(credential, lease)
        status = getattr(getattr(exc, "response", None), "status_code", None)
        what = f"HTTP {status}" if status else type(exc).__name__
        logger.warning("mailbox %s: token endpoint unavailable: %s", credential.pk, what)
        raise TokenEndpointUnavailable(
            f"The token endpoint could not refresh the access token ({what}); retried later."
        ) from None


def _refresh_refused(credential: SmtpCredential, lease: datetime, exc: OAuthError) -> Exception:
    """The token endpoint refused the refresh: the error to raise. A refused refresh
    token (invalid_grant) is forgotten and the mailbox needs a re-authorization; any
    other refusal only releases the lease."""
    text = f"{exc.error}: {exc.description}" if exc.description else str(exc.error)
    if exc.error != "invalid_grant":
        _lease_release(credential, lease)
        logger.warning("mailbox %s: token refresh failed: %s", credential.pk, exc.error)
        return TokenEndpointUnavailable(
            f"The token endpoint refused the refresh ({text})."[:ERROR_MAX_CHARS]
        )
    error = (
        f"The provider refused the mailbox's refresh token ({text}); it needs to be re-authorized."
    )[:ERROR_MAX_CHARS]
    SmtpCredential.objects.filter(pk=credential.pk, oauth_refreshing_until=lease).update(
        oauth_status=Status.REAUTHORIZATION_REQUIRED,
        oauth_refresh_token="",
        oauth_access_token="",
        oauth_access_token_expires_at=None,
        oauth_refreshing_until=None,
        last_error=error,
        last_error_at=timezone.now(),
    )
    credential.oauth_status = Status.REAUTHORIZATION_REQUIRED
    logger.warning(
        "mailbox %s: refresh refused (%s), re-authorization required", credential.pk, exc.error
    )
    return ReauthorizationRequired(error)


def access_token_forget(*, credential: SmtpCredential) -> None:
    """The server refused the access token: the next connection refreshes it."""
    SmtpCredential.objects.filter(pk=credential.pk).update(oauth_access_token_expires_at=None)
    credential.oauth_access_token_expires_at = None
