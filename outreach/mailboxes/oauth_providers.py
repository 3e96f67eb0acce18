"""The OAuth 2.0 providers of mailboxes (outreach.mailboxes.oauth): Google Workspace
and Microsoft 365, their settings, scopes and servers, and the client session to their
endpoints."""

import re
from dataclasses import dataclass, field

from authlib.integrations.requests_client import OAuth2Session
from django.conf import settings

from outreach.emails import InvalidEmail, email_clean
from outreach.models.mailboxes import SmtpCredential


@dataclass(frozen=True)
class Provider:
    name: str
    auth_method: str
    settings_prefix: str
    scope: str
    # Extra authorization request parameters: what makes the provider return a refresh
    # token every time.
    authorize_params: dict = field(default_factory=dict)
    smtp_host: str = ""
    smtp_port: int = 587
    imap_host: str = ""
    imap_port: int = 993

    def _setting(self, name: str) -> str:
        return getattr(settings, f"{self.settings_prefix}_OAUTH_{name}")

    @property
    def client_id(self) -> str:
        return self._setting("CLIENT_ID")

    @property
    def client_secret(self) -> str:
        return self._setting("CLIENT_SECRET")

    @property
    def authorize_url(self) -> str:
        return self._setting("AUTHORIZE_URL")

    @property
    def token_url(self) -> str:
        return self._setting("TOKEN_URL")

    @property
    def redirect_uri(self) -> str:
        return f"{settings.BASE_URL}/oauth/callback/{self.name}"

    def issuer_valid(self, issuer: str) -> bool:
        if self.name == "google":
            return issuer in ("https://accounts.google.com", "accounts.google.com")
        # Microsoft's v2.0 issuer names the user's tenant. With a tenant id configured
        # only that one passes; with common/organizations/consumers (or a domain) any.
        match = re.fullmatch(r"https://login\.microsoftonline\.com/([0-9a-f-]{36})/v2\.0", issuer)
        if match is None:
            return False
        tenant = settings.MICROSOFT_OAUTH_TENANT.lower()
        if re.fullmatch(r"[0-9a-f-]{36}", tenant):
            return match.group(1) == tenant
        return True

    def mailbox_address(self, claims: dict) -> str:
        """The mailbox's address from the ID token's claims; "" when it has none."""
        if self.name == "google":
            # Google asserts `email` only with `email_verified`.
            return str(claims.get("email") or "") if claims.get("email_verified") else ""
        # Microsoft: the sign-in name (`preferred_username`, else `upn`: the mailbox's
        # address at Microsoft 365), which the tenant controls. Never `email`: a user can
        # set it to any address, unverified, so it would name a mailbox nobody proved.
        for name in ("preferred_username", "upn"):
            try:
                return email_clean(claims.get(name))
            except InvalidEmail:
                continue
        return ""


PROVIDERS = {
    "google": Provider(
        name="google",
        auth_method=SmtpCredential.AuthMethod.OAUTH_GOOGLE,
        settings_prefix="GOOGLE",
        scope="openid email https://mail.google.com/",
        authorize_params={"access_type": "offline", "prompt": "consent"},
        smtp_host="smtp.gmail.com",
        imap_host="imap.gmail.com",
    ),
    "microsoft": Provider(
        name="microsoft",
        auth_method=SmtpCredential.AuthMethod.OAUTH_MICROSOFT,
        settings_prefix="MICROSOFT",
        scope="openid email profile offline_access "
        "https://outlook.office.com/SMTP.Send https://outlook.office.com/IMAP.AccessAsUser.All",
        authorize_params={"prompt": "select_account"},
        smtp_host="smtp.office365.com",
        imap_host="outlook.office365.com",
    ),
}
PROVIDER_BY_AUTH_METHOD = {p.auth_method: p for p in PROVIDERS.values()}


def oauth_session(provider: Provider) -> OAuth2Session:
    return OAuth2Session(
        client_id=provider.client_id,
        client_secret=provider.client_secret,
        scope=provider.scope,
        redirect_uri=provider.redirect_uri,
        code_challenge_method="S256",
        token_endpoint_auth_method="client_secret_post",  # noqa: S106 - a method name
    )
