"""Connecting an OAuth mailbox goes through the service's own page, which names the
account the mailbox would join: a connect link an attacker forwards cannot quietly tie
the reader's mailbox to the attacker's account. And Microsoft's address is the sign-in
name the tenant controls, never the user-editable `email` claim."""

import re
from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.test import Client
from django.utils import timezone

from config.logs import redact
from outreach.models.mailboxes import OAuthAuthorization, SmtpCredential
from tests.support.oauth_provider import connect_page_continue

pytestmark = pytest.mark.django_db

OWNER = "owner@example.com"


def start(api_client, provider="google") -> str:
    response = api_client.post("/smtp_credentials/oauth", {"provider": provider}, format="json")
    assert response.status_code == 201, response.content
    return urlsplit(response.json()["authorization_url"]).path


def press_continue(client: Client, path: str):
    """The page's button, as a browser posts it: with the form's CSRF token."""
    page = client.get(path)
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.content.decode())
    assert token is not None
    return client.post(path, {"csrfmiddlewaretoken": token.group(1)})


def test_the_authorization_url_is_the_services_page_naming_the_account(
    api_client, account, oauth_provider
):
    oauth_provider()
    path = start(api_client)
    assert path.startswith("/oauth/connect/")

    page = Client().get(path)
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    assert page["X-Frame-Options"] == "DENY"  # its button cannot be clicked through a frame
    text = page.content.decode()
    assert f"to {account.email}?" in text
    assert "send email as you and read your inbox" in text
    assert '<form method="post"' in text and "csrfmiddlewaretoken" in text
    assert "Continue to Google" in text
    # Nothing was sent towards the provider: no state exists yet.
    flow = OAuthAuthorization.objects.get()
    assert (flow.state_hash, flow.continued_at) == (None, None)


def test_only_the_pages_own_button_goes_on_to_the_provider(api_client, oauth_provider):
    provider = oauth_provider()
    path = start(api_client)
    browser = Client(enforce_csrf_checks=True)

    # A cross-site form posting straight to it (skipping the page) is refused.
    assert browser.post(path).status_code == 403
    assert OAuthAuthorization.objects.get().continued_at is None

    response = press_continue(browser, path)
    assert response.status_code == 303
    location = urlsplit(response["Location"])
    assert f"{location.scheme}://{location.netloc}{location.path}" == provider.authorize_url
    state = parse_qs(location.query)["state"][0]
    [cookie] = [c for c in response.cookies.values() if c.value == state]
    assert cookie["path"] == "/oauth/callback/google"
    assert cookie["httponly"] and cookie["samesite"] == "Lax"
    assert OAuthAuthorization.objects.get().continued_at is not None


def test_the_button_works_once(api_client, anon_client, oauth_provider):
    oauth_provider()
    path = start(api_client)
    connect_page_continue(anon_client, path)

    for again in (anon_client.get(path), anon_client.post(path)):
        assert again.status_code == 400
        assert "already used" in again.content.decode()


def test_a_tampered_or_expired_link_goes_nowhere(api_client, anon_client, oauth_provider):
    oauth_provider()
    path = start(api_client)
    tampered = path[:-1] + ("A" if path[-1] != "A" else "B")
    for method in (anon_client.get, anon_client.post):
        page = method(tampered)
        assert page.status_code == 400
        assert "not valid" in page.content.decode()

    OAuthAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    for method in (anon_client.get, anon_client.post):
        page = method(path)
        assert page.status_code == 400
        assert "expired" in page.content.decode()
    assert OAuthAuthorization.objects.get().continued_at is None


def test_the_link_is_redacted_in_logs(api_client, oauth_provider):
    oauth_provider()
    path = start(api_client)
    assert redact(f'"GET {path} HTTP/1.1" 200') == '"GET /oauth/connect/[redacted] HTTP/1.1" 200'


def test_other_methods_are_not_allowed(api_client, anon_client, oauth_provider):
    oauth_provider()
    assert anon_client.put(start(api_client)).status_code == 405


def test_a_provider_url_opened_in_another_browser_connects_nothing(api_client, oauth_provider):
    """The attacker presses the button himself and forwards the provider's URL: the
    victim's consent comes back to a browser without the flow's cookie."""
    provider = oauth_provider()
    attacker, victim = Client(), Client()
    provider_url = connect_page_continue(attacker, start(api_client))

    params = provider.consent(provider_url, email="victim@example.com")
    page = victim.get("/oauth/callback/google", params)
    assert page.status_code == 400
    assert "did not start in this browser" in page.content.decode()
    assert not SmtpCredential.objects.exists()
    assert provider.token_requests == []  # the victim's code was never exchanged
    # And the state is spent: the attacker cannot finish it with his cookie either.
    again = attacker.get("/oauth/callback/google", params)
    assert again.status_code == 400
    assert not SmtpCredential.objects.exists()


def test_the_connected_page_names_the_account(api_client, anon_client, account, oauth_provider):
    provider = oauth_provider()
    params = provider.consent(connect_page_continue(anon_client, start(api_client)), email=OWNER)
    page = anon_client.get("/oauth/callback/google", params)
    assert page.status_code == 200
    text = page.content.decode()
    assert f"{OWNER} is connected to {account.email}" in text
    assert SmtpCredential.objects.get().account_id == account.pk


# --- Microsoft: the address the tenant vouches for ---------------------------------------


def connect_microsoft(api_client, client, provider, claims: dict):
    params = provider.consent(
        connect_page_continue(client, start(api_client, "microsoft")),
        email="ann@contoso.example",
        claims=claims,
    )
    return client.get("/oauth/callback/microsoft", params)


def test_microsoft_never_takes_the_user_editable_email_claim(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider("microsoft")
    page = connect_microsoft(api_client, anon_client, provider, {"email": "ceo@bank.example"})
    assert page.status_code == 200
    assert SmtpCredential.objects.get().from_email == "ann@contoso.example"


def test_microsoft_takes_the_upn_when_the_sign_in_name_is_no_address(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider("microsoft")
    claims = {"preferred_username": "+15551234567", "upn": "Ann@Contoso.example"}
    page = connect_microsoft(api_client, anon_client, provider, claims)
    assert page.status_code == 200
    assert SmtpCredential.objects.get().from_email == "Ann@contoso.example"


def test_microsoft_with_only_an_email_claim_connects_nothing(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider("microsoft")
    claims = {"preferred_username": None, "email": "ann@contoso.example"}
    page = connect_microsoft(api_client, anon_client, provider, claims)
    assert page.status_code == 400
    assert "email address" in page.content.decode()
    assert not SmtpCredential.objects.exists()
