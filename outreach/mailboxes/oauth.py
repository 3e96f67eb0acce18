"""Mailboxes over OAuth 2.0: Google Workspace and Microsoft 365 (docs/outreach.md,
"Google and Microsoft mailboxes").

The providers (their settings, scopes and servers) are in oauth_providers.py.

1. `authorization_start` (the API): an OAuthAuthorization row bound to the account,
   valid AUTHORIZATION_LIFETIME, and the signed link of the service's own connect page,
   which names the account. Nothing goes to the provider yet: a link an attacker
   forwards must not take its reader straight to a consent page that cannot say whose
   account the mailbox would join.
2. `authorization_continue` (the connect page's button, a CSRF-checked POST, once): the
   authorization code flow with PKCE (S256), offline access and an OpenID Connect
   nonce, through Authlib's requests client. The single-use `state` is kept hashed with
   the code verifier (encrypted), and given to the browser in a cookie as well.
3. `authorization_complete` (the public callback): takes the state once, checks that it
   came back to the browser that pressed the button (its cookie), exchanges the code
   with the code verifier, reads the mailbox address from the ID token that came with
   the tokens, and creates the credential, or re-authorizes the account's mailbox with
   that address.
4. `access_token_get` (outreach.mailboxes.oauth_tokens; sending and IMAP polling): the stored access token while it has
   more than REFRESH_MARGIN left, else a refresh; one refresh at a time per mailbox
   across workers (a lease on the credential row, taken with a conditional UPDATE), no
   database connection or row lock held while the token endpoint answers. A refused
   refresh (`invalid_grant`) marks the mailbox `reauthorization_required`.

Tokens are never logged, never returned by the API, and stored encrypted
(EncryptedTextField, FIELD_ENCRYPTION_KEY).
"""

import hashlib
import json
import logging
import secrets
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

import requests
from authlib.integrations.requests_client import OAuthError
from authlib.oidc.core import CodeIDToken
from django.conf import settings
from django.core import signing
from django.db import transaction
from django.utils import timezone
from joserfc.errors import JoseError
from joserfc.jws import extract_compact

from config.db import connection_release
from outreach.emails import InvalidEmail, email_clean
from outreach.errors import OAuthNotConfigured
from outreach.mailboxes.oauth_providers import PROVIDERS, Provider, oauth_session
from outreach.models.mailboxes import OAuthAuthorization, Security, SmtpCredential

logger = logging.getLogger(__name__)

# The mailbox settings POST /smtp_credentials/oauth takes, applied by the callback to the
# mailbox it creates.
OAUTH_START_SETTINGS = ("daily_limit", "min_interval_seconds", "max_interval_seconds", "from_name")

AUTHORIZATION_LIFETIME = timedelta(minutes=15)
# Refresh when the stored access token has less than this left (providers give an hour):
# a token never expires in the middle of a batch's SMTP session.
REFRESH_MARGIN = timedelta(minutes=5)
# Connect and read timeout of each request to a token endpoint.
TOKEN_TIMEOUT_SECONDS = 10.0
# A refresh owns its mailbox this long at most; the lease of a lost worker lapses.
REFRESH_LEASE = timedelta(seconds=30)
# How often a worker waiting for another's refresh of the same mailbox looks again.
REFRESH_POLL_SECONDS = 0.05
ERROR_MAX_CHARS = 1000

Status = SmtpCredential.OAuthStatus


def _state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


def browser_cookie_name(state: str) -> str:
    """The cookie that carries a flow's state in the browser that continued it (one per
    flow: two tabs may connect two mailboxes at once)."""
    return f"oauth_{_state_hash(state)[:16]}"


def _connect_signer() -> signing.Signer:
    # No key given: signed with SECRET_KEY, verified with SECRET_KEY_FALLBACKS too.
    return signing.Signer(salt="outreach.oauth.connect", sep=".")


# --- 1. start -------------------------------------------------------------------------


def authorization_start(
    *, account, provider_name: str, credential_settings: dict
) -> tuple[str, datetime]:
    """The link of the connect page for the account, and when it expires."""
    provider = PROVIDERS[provider_name]
    if not provider.client_id:
        raise OAuthNotConfigured(
            f"No OAuth client is configured for {provider_name}.",
            details={"provider": provider_name},
        )
    now = timezone.now()
    # Rows of flows long over (kept a day so a late reused link still says "used").
    OAuthAuthorization.objects.filter(expires_at__lt=now - timedelta(days=1)).delete()
    flow = OAuthAuthorization.objects.create(
        account=account,
        provider=provider_name,
        credential_settings=credential_settings,
        expires_at=now + AUTHORIZATION_LIFETIME,
    )
    token = _connect_signer().sign(flow.pk.hex)
    return f"{settings.BASE_URL}/oauth/connect/{token}", flow.expires_at


class AuthorizationFailed(Exception):
    """The connect page or the callback cannot go on; the message is for the person who
    was signing in (no secret in it). Nothing was created."""


# --- 2. the connect page ----------------------------------------------------------------

_START_AGAIN = "Ask for a new link to connect the mailbox."


def authorization_to_continue(*, token: str) -> OAuthAuthorization:
    """The flow a connect link names, with its account, while its button may be pressed."""
    try:
        flow_id = _connect_signer().unsign(token)
        flow = OAuthAuthorization.objects.select_related("account").filter(pk=flow_id).first()
    except (signing.BadSignature, ValueError):
        flow = None
    if flow is None:
        raise AuthorizationFailed(f"This link to connect a mailbox is not valid. {_START_AGAIN}")
    if flow.continued_at is not None or flow.used_at is not None:
        raise AuthorizationFailed(
            f"This link to connect a mailbox was already used. {_START_AGAIN}"
        )
    if flow.expires_at <= timezone.now():
        raise AuthorizationFailed(
            f"This link to connect a mailbox expired (it is valid for 15 minutes). {_START_AGAIN}"
        )
    return flow


def authorization_continue(*, token: str) -> tuple[str, str, OAuthAuthorization]:
    """The connect page's button, once: the provider's consent URL, the flow's state (for
    the browser's cookie) and the flow."""
    flow = authorization_to_continue(token=token)
    provider = PROVIDERS[flow.provider]
    now = timezone.now()
    state = secrets.token_urlsafe(32)
    code_verifier = secrets.token_urlsafe(64)  # 86 characters (RFC 7636: 43 to 128)
    nonce = secrets.token_urlsafe(24)
    continued = OAuthAuthorization.objects.filter(
        pk=flow.pk, continued_at__isnull=True, expires_at__gt=now
    ).update(
        continued_at=now, state_hash=_state_hash(state), code_verifier=code_verifier, nonce=nonce
    )
    if not continued:
        raise AuthorizationFailed(
            f"This link to connect a mailbox was already used. {_START_AGAIN}"
        )
    url, _ = oauth_session(provider).create_authorization_url(
        provider.authorize_url,
        state=state,
        code_verifier=code_verifier,
        nonce=nonce,
        **provider.authorize_params,
    )
    return url, state, flow


# --- 3. callback ----------------------------------------------------------------------


def _authorization_take(provider_name: str, state: str, now: datetime) -> OAuthAuthorization:
    """The flow of `state`, marked used (a conditional UPDATE: one callback wins)."""
    row = (
        OAuthAuthorization.objects.select_related("account")
        .filter(state_hash=_state_hash(state), provider=provider_name)
        .first()
    )
    if row is None:
        raise AuthorizationFailed(
            "This sign-in link is not valid. Start connecting the mailbox again."
        )
    if row.used_at is not None:
        raise AuthorizationFailed(
            "This sign-in link was already used. Start connecting the mailbox again."
        )
    if row.expires_at <= now:
        raise AuthorizationFailed(
            "This sign-in link expired (it is valid for 15 minutes). "
            "Start connecting the mailbox again."
        )
    taken = OAuthAuthorization.objects.filter(
        pk=row.pk, used_at__isnull=True, expires_at__gt=now
    ).update(used_at=now, code_verifier="")
    if not taken:
        raise AuthorizationFailed(
            "This sign-in link was already used. Start connecting the mailbox again."
        )
    return row


def id_token_claims(*, provider: Provider, id_token: str, nonce: str) -> dict:
    """The claims of an ID token received from the token endpoint, checked: issuer,
    audience (our client id), expiry, issue time and nonce.

    The signature is not verified: the token came in the token endpoint's response,
    over TLS, to our authenticated request, which OpenID Connect Core 3.1.3.7 allows as
    validation in place of the signature for the code flow.
    """
    try:
        jws = extract_compact(id_token.encode())
        claims = json.loads(jws.payload)
        if not isinstance(claims, dict):
            raise ValueError("the payload is not a JSON object")
        checked = CodeIDToken(
            claims,
            jws.headers(),
            options={
                "iss": {"essential": True, "validate": lambda _c, v: provider.issuer_valid(v)},
                "aud": {"essential": True, "value": provider.client_id},
            },
            params={"nonce": nonce},
        )
        checked.validate(now=int(time.time()), leeway=120)
    except (JoseError, ValueError, TypeError) as exc:
        raise AuthorizationFailed(
            f"The provider's answer could not be checked ({type(exc).__name__}: {exc})."[
                :ERROR_MAX_CHARS
            ]
        ) from None
    return dict(checked)


def _tokens_fetch(provider: Provider, code: str, code_verifier: str) -> dict:
    connection_release()  # no database connection held while the provider answers
    try:
        return dict(
            oauth_session(provider).fetch_token(
                provider.token_url,
                grant_type="authorization_code",
                code=code,
                code_verifier=code_verifier,
                timeout=TOKEN_TIMEOUT_SECONDS,
            )
        )
    except OAuthError as exc:
        raise AuthorizationFailed(
            f"The provider refused to complete the sign-in ({exc.error})."
        ) from None
    except (requests.RequestException, ValueError) as exc:
        logger.warning("oauth %s: token endpoint failed: %s", provider.name, type(exc).__name__)
        raise AuthorizationFailed(
            "The provider could not be reached to complete the sign-in. Try again."
        ) from None


@dataclass(frozen=True)
class Connected:
    credential: SmtpCredential
    created: bool
    account_email: str  # the account the mailbox joined


def authorization_complete(
    *, provider_name: str, params: dict, browser_state: str | None
) -> Connected:
    """Finish a flow from the provider's redirect (`code`, `state`, or `error`).
    `browser_state`: the state the browser kept when it left the connect page."""
    provider = PROVIDERS.get(provider_name)
    state = params.get("state") or ""
    if provider is None or not state:
        raise AuthorizationFailed("This sign-in link is not valid.")
    now = timezone.now()
    flow = _authorization_take(provider_name, state, now)
    # Spent either way. A provider URL taken from one browser and opened in another (an
    # attacker's, forwarded to a victim) comes back without the cookie.
    if not browser_state or not secrets.compare_digest(browser_state, state):
        raise AuthorizationFailed(
            "This sign-in did not start in this browser, so the mailbox was not connected. "
            "Open the link to connect the mailbox again, and continue from its page."
        )
    if params.get("error"):
        if params["error"] == "access_denied":
            raise AuthorizationFailed("Access was not granted, so the mailbox was not connected.")
        raise AuthorizationFailed(
            f"The provider did not authorize the mailbox ({params['error']})."[:ERROR_MAX_CHARS]
        )
    code = params.get("code") or ""
    if not code:
        raise AuthorizationFailed("The provider's answer carried no authorization code.")
    tokens = _tokens_fetch(provider, code, flow.code_verifier)
    if not tokens.get("access_token") or not tokens.get("refresh_token"):
        raise AuthorizationFailed(
            "The provider gave no refresh token, so the mailbox could not stay connected."
        )
    if not tokens.get("id_token"):
        raise AuthorizationFailed("The provider's answer carried no ID token.")
    claims = id_token_claims(provider=provider, id_token=tokens["id_token"], nonce=flow.nonce)
    try:
        email = email_clean(provider.mailbox_address(claims))
    except InvalidEmail:
        raise AuthorizationFailed(
            "The provider did not tell the mailbox's email address, so it was not connected."
        ) from None
    return _credential_connect(flow=flow, provider=provider, email=email, tokens=tokens, now=now)


def token_expires_at(tokens: dict, now: datetime) -> datetime:
    try:
        seconds = int(tokens.get("expires_in") or 3600)
    except (TypeError, ValueError):
        seconds = 3600
    return now + timedelta(seconds=max(seconds, 0))


def _credential_connect(
    *, flow: OAuthAuthorization, provider: Provider, email: str, tokens: dict, now: datetime
) -> Connected:
    """Create the mailbox, or re-authorize the account's mailbox with this address
    (the oldest, if several). A password mailbox of that address becomes an OAuth one,
    its hosts preset and its passwords dropped."""
    oauth = {
        "oauth_status": Status.CONNECTED,
        "oauth_refresh_token": tokens["refresh_token"],
        "oauth_access_token": tokens["access_token"],
        "oauth_access_token_expires_at": token_expires_at(tokens, now),
        "oauth_refreshing_until": None,
        "last_error": "",
        "last_error_at": None,
    }
    preset = {
        "auth_method": provider.auth_method,
        "smtp_host": provider.smtp_host,
        "smtp_port": provider.smtp_port,
        "smtp_security": Security.STARTTLS,
        "smtp_username": email,
        "smtp_password": "",
        "imap_host": provider.imap_host,
        "imap_port": provider.imap_port,
        "imap_security": Security.SSL,
        "imap_username": email,
        "imap_password": "",
    }
    with transaction.atomic():
        existing = (
            SmtpCredential.objects.select_for_update()
            .filter(account_id=flow.account_id, from_email__iexact=email)
            .exclude(auth_method=SmtpCredential.AuthMethod.SIMULATOR)  # stays one
            .order_by("created_at", "pk")
            .first()
        )
        if existing is not None:
            changes = dict(oauth)
            if existing.auth_method != provider.auth_method:
                changes.update(preset)
            for name, value in changes.items():
                setattr(existing, name, value)
            existing.save(update_fields=[*changes, "updated_at"])
            logger.info("mailbox %s re-authorized with %s", existing.pk, provider.name)
            return Connected(existing, created=False, account_email=flow.account.email)
        credential = SmtpCredential(account_id=flow.account_id, from_email=email)
        for name, value in {**preset, **oauth}.items():
            setattr(credential, name, value)
        for name, value in flow.credential_settings.items():
            if name in OAUTH_START_SETTINGS:
                setattr(credential, name, value)
        credential.save()
    logger.info("mailbox %s connected with %s", credential.pk, provider.name)
    return Connected(credential, created=True, account_email=flow.account.email)
