"""Mailboxes over OAuth 2.0: the authorization flow against a real local authorization
server (tests/support/oauth_provider.py), the public callback pages, and the
credentials it creates."""

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import pytest
from django.db import connection
from django.utils import timezone

from outreach.models.mailboxes import OAuthAuthorization, SmtpCredential
from tests.outreach.factories import CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields
from tests.support.oauth_provider import connect_page_continue

pytestmark = pytest.mark.django_db

OWNER = "owner@example.com"


def start(api_client, provider="google", **body) -> dict:
    response = api_client.post(
        "/smtp_credentials/oauth", {"provider": provider, **body}, format="json"
    )
    assert response.status_code == 201, response.content
    return response.json()


def callback(client, params: dict, provider="google"):
    return client.get(f"/oauth/callback/{provider}", params)


def connect(api_client, client, provider_server, email=OWNER, **body) -> SmtpCredential:
    started = start(api_client, provider_server.name, **body)
    params = provider_server.consent(
        connect_page_continue(client, started["authorization_url"]), email=email
    )
    page = callback(client, params, provider_server.name)
    assert page.status_code == 200, page.content.decode()
    return SmtpCredential.objects.get(from_email=email, auth_method=f"oauth_{provider_server.name}")


def stored_columns(credential_id) -> tuple[str, str]:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT oauth_refresh_token, oauth_access_token FROM outreach_smtpcredential "
            "WHERE id = %s",
            [credential_id],
        )
        return cursor.fetchone()


# --- POST /smtp_credentials/oauth --------------------------------------------------------


def test_it_starts_the_code_flow_with_pkce_and_a_state_bound_to_the_account(
    api_client, anon_client, account, oauth_provider, settings
):
    provider = oauth_provider()
    before = timezone.now()
    body = start(api_client, daily_limit=20, from_name="Ann")
    assert body["authorization_url"].startswith(f"{settings.BASE_URL}/oauth/connect/")

    url = urlsplit(connect_page_continue(anon_client, body["authorization_url"]))
    assert f"{url.scheme}://{url.netloc}{url.path}" == provider.authorize_url
    query = {k: v[0] for k, v in parse_qs(url.query).items()}
    assert query["response_type"] == "code"
    assert query["client_id"] == provider.client_id
    assert query["redirect_uri"] == f"{settings.BASE_URL}/oauth/callback/google"
    assert query["code_challenge_method"] == "S256"
    assert len(query["code_challenge"]) == 43  # base64url SHA-256
    assert query["access_type"] == "offline" and query["prompt"] == "consent"
    assert set(query["scope"].split()) == {"openid", "email", "https://mail.google.com/"}
    assert query["state"] and query["nonce"]

    flow = OAuthAuthorization.objects.get()
    assert flow.account_id == account.pk
    assert flow.credential_settings == {"daily_limit": 20, "from_name": "Ann"}
    # Neither the state nor the verifier is stored in the clear.
    assert query["state"] not in flow.state_hash
    expires_at = timezone.datetime.fromisoformat(body["expires_at"].replace("Z", "+00:00"))
    assert before + timedelta(minutes=14) < expires_at <= timezone.now() + timedelta(minutes=15)


def test_microsoft_asks_for_offline_access_and_the_mail_scopes(
    api_client, anon_client, oauth_provider
):
    oauth_provider("microsoft")
    body = start(api_client, "microsoft")
    query = parse_qs(urlsplit(connect_page_continue(anon_client, body["authorization_url"])).query)
    assert set(query["scope"][0].split()) >= {
        "offline_access",
        "openid",
        "https://outlook.office.com/SMTP.Send",
        "https://outlook.office.com/IMAP.AccessAsUser.All",
    }


def test_a_provider_without_a_client_id_is_not_configured(api_client, settings):
    settings.MICROSOFT_OAUTH_CLIENT_ID = ""
    response = api_client.post("/smtp_credentials/oauth", {"provider": "microsoft"}, format="json")
    body = assert_error(response, 422, "oauth_not_configured")
    assert body["details"] == {"provider": "microsoft"}
    assert not OAuthAuthorization.objects.exists()


@pytest.mark.parametrize(
    ("payload", "fields"),
    [
        ({}, ["provider"]),
        ({"provider": "yahoo"}, ["provider"]),
        ({"provider": "google", "daily_limit": -1}, ["daily_limit"]),
        ({"provider": "google", "from_name": "x" * 201}, ["from_name"]),
        ({"provider": "google", "min_interval_seconds": -1}, ["min_interval_seconds"]),
        ({"provider": "google", "max_interval_seconds": 86401}, ["max_interval_seconds"]),
        ({"provider": "google", "min_interval_seconds": 400}, ["min_interval_seconds"]),
        ({"provider": "google", "max_interval_seconds": 60}, ["max_interval_seconds"]),
    ],
)
def test_bad_input_is_validation_failed(api_client, oauth_provider, payload, fields):
    oauth_provider()
    assert_fields(api_client.post("/smtp_credentials/oauth", payload, format="json"), *fields)
    assert not OAuthAuthorization.objects.exists()


def test_it_needs_an_api_key(anon_client):
    response = anon_client.post("/smtp_credentials/oauth", {"provider": "google"}, format="json")
    assert_error(response, 401, "authentication_required")


# --- GET /oauth/callback/<provider> ------------------------------------------------------


def test_the_callback_creates_the_mailbox_with_the_providers_hosts(
    api_client, anon_client, account, oauth_provider
):
    provider = oauth_provider()
    started = start(
        api_client,
        daily_limit=20,
        from_name="Ann Owner",
        min_interval_seconds=30,
        max_interval_seconds=90,
    )
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email="Owner@Example.com"
    )

    page = callback(anon_client, params)
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    assert "Owner@example.com is connected" in page.content.decode()

    credential = SmtpCredential.objects.get()
    assert credential.account_id == account.pk
    assert credential.from_email == "Owner@example.com"
    assert (credential.smtp_host, credential.smtp_port, credential.smtp_security) == (
        "smtp.gmail.com",
        587,
        "starttls",
    )
    assert (credential.imap_host, credential.imap_port, credential.imap_security) == (
        "imap.gmail.com",
        993,
        "ssl",
    )
    assert credential.smtp_username == credential.imap_username == "Owner@example.com"
    assert (credential.daily_limit, credential.from_name) == (20, "Ann Owner")
    assert (credential.min_interval_seconds, credential.max_interval_seconds) == (30, 90)
    assert credential.auth_method == "oauth_google"
    assert credential.oauth_status == "connected"
    [refresh_token] = provider.refresh_tokens_of("Owner@Example.com")
    assert credential.oauth_refresh_token == refresh_token
    assert credential.oauth_access_token_expires_at > timezone.now() + timedelta(minutes=50)
    # Encrypted at rest.
    stored_refresh, stored_access = stored_columns(credential.pk)
    assert refresh_token not in stored_refresh
    assert credential.oauth_access_token not in stored_access

    # The code went with its verifier (the provider checked the S256 challenge).
    [exchange] = provider.token_requests
    assert exchange["grant_type"] == "authorization_code"
    assert len(exchange["code_verifier"]) >= 43

    shown = api_client.get(f"/smtp_credentials/{credential.pk}").json()
    assert shown["auth_method"] == "oauth_google"
    assert shown["oauth_status"] == "connected"
    assert shown["smtp_password_set"] is False
    text = str(shown)
    assert refresh_token not in text and credential.oauth_access_token not in text
    assert not any(name.startswith("oauth_") and name != "oauth_status" for name in shown)


def test_microsoft_mailboxes_take_the_sign_in_name_and_office365_hosts(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider("microsoft")
    credential = connect(api_client, anon_client, provider, email="ann@contoso.example")
    assert credential.auth_method == "oauth_microsoft"
    assert (credential.smtp_host, credential.smtp_port) == ("smtp.office365.com", 587)
    assert (credential.imap_host, credential.imap_port) == ("outlook.office365.com", 993)


def test_a_password_mailbox_lists_with_null_oauth_status(api_client, account):
    CredentialFactory(account=account)
    [shown] = api_client.get("/smtp_credentials").json()
    assert (shown["auth_method"], shown["oauth_status"]) == ("password", None)


def test_the_state_works_once(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )
    assert callback(anon_client, params).status_code == 200

    again = callback(anon_client, params)
    assert again.status_code == 400
    assert "already used" in again.content.decode()
    assert SmtpCredential.objects.count() == 1
    assert len(provider.token_requests) == 1  # the second callback never reached it


def test_a_head_request_does_not_spend_the_state(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )
    assert anon_client.head("/oauth/callback/google", params).status_code == 200
    assert anon_client.post("/oauth/callback/google", params).status_code == 405
    assert not SmtpCredential.objects.exists()
    assert callback(anon_client, params).status_code == 200


def test_an_expired_state_creates_nothing(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )
    OAuthAuthorization.objects.update(expires_at=timezone.now() - timedelta(seconds=1))

    page = callback(anon_client, params)
    assert page.status_code == 400
    assert "expired" in page.content.decode()
    assert not SmtpCredential.objects.exists()
    assert provider.token_requests == []


def test_a_forged_state_creates_nothing(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )

    for forged in ({**params, "state": "forged"}, {"code": params["code"]}):
        page = callback(anon_client, forged)
        assert page.status_code == 400
        assert "not valid" in page.content.decode()
    # A state of Google's flow is not one of Microsoft's.
    oauth_provider("microsoft")
    assert callback(anon_client, params, "microsoft").status_code == 400
    assert not SmtpCredential.objects.exists()
    assert provider.token_requests == []
    # The real one still works.
    assert callback(anon_client, params).status_code == 200


def test_an_unknown_provider_is_a_404_page(anon_client):
    page = anon_client.get("/oauth/callback/yahoo", {"code": "c", "state": "s"})
    assert page.status_code == 404
    assert page["Content-Type"].startswith("text/html")


def test_a_declined_consent_creates_nothing_and_uses_the_state(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.deny(connect_page_continue(anon_client, started["authorization_url"]))

    page = callback(anon_client, params)
    assert page.status_code == 400
    assert "not granted" in page.content.decode()
    assert not SmtpCredential.objects.exists()
    assert OAuthAuthorization.objects.get().used_at is not None


def test_a_refused_code_exchange_creates_nothing(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )

    page = callback(anon_client, {**params, "code": "not-the-code"})
    assert page.status_code == 400
    assert "invalid_grant" in page.content.decode()
    assert not SmtpCredential.objects.exists()


def test_an_unreachable_token_endpoint_creates_nothing(api_client, anon_client, oauth_provider):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER
    )
    provider.fail_next(503)

    page = callback(anon_client, params)
    assert page.status_code == 400
    assert "could not be reached" in page.content.decode()
    assert not SmtpCredential.objects.exists()


@pytest.mark.parametrize(
    ("claims", "shown"),
    [
        ({"email": None}, "email address"),
        ({"email_verified": False}, "email address"),
        ({"aud": "someone-else"}, "could not be checked"),
        ({"iss": "https://evil.example"}, "could not be checked"),
        ({"nonce": "replayed"}, "could not be checked"),
        ({"exp": 1_000_000_000}, "could not be checked"),
    ],
)
def test_an_id_token_without_a_usable_verified_email_creates_nothing(
    api_client, anon_client, oauth_provider, claims, shown
):
    provider = oauth_provider()
    started = start(api_client)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER, claims=claims
    )

    page = callback(anon_client, params)
    assert page.status_code == 400
    assert shown in page.content.decode()
    assert not SmtpCredential.objects.exists()


def test_microsoft_without_any_address_claim_creates_nothing(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider("microsoft")
    started = start(api_client, "microsoft")
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]),
        email=OWNER,
        claims={"preferred_username": None},
    )
    page = callback(anon_client, params, "microsoft")
    assert page.status_code == 400
    assert not SmtpCredential.objects.exists()


def test_connecting_again_re_authorizes_the_accounts_mailbox(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider()
    credential = connect(api_client, anon_client, provider, daily_limit=7)
    SmtpCredential.objects.filter(pk=credential.pk).update(
        oauth_status="reauthorization_required", oauth_refresh_token="", last_error="refused"
    )

    started = start(api_client, daily_limit=99)
    params = provider.consent(
        connect_page_continue(anon_client, started["authorization_url"]), email=OWNER.upper()
    )
    page = callback(anon_client, params)
    assert page.status_code == 200
    assert "re-authorized" in page.content.decode()

    [again] = SmtpCredential.objects.all()
    assert again.pk == credential.pk
    assert again.oauth_status == "connected"
    assert again.last_error == ""
    assert again.daily_limit == 7  # the mailbox keeps its settings
    assert again.oauth_refresh_token == provider.refresh_tokens_of(OWNER.upper())[0]


def test_a_password_mailbox_of_that_address_becomes_an_oauth_one(
    api_client, anon_client, account, oauth_provider
):
    provider = oauth_provider()
    existing = CredentialFactory(account=account, from_email=OWNER, smtp_password="old-pw")
    credential = connect(api_client, anon_client, provider)
    assert credential.pk == existing.pk
    assert credential.auth_method == "oauth_google"
    assert (credential.smtp_host, credential.smtp_password) == ("smtp.gmail.com", "")


def test_another_accounts_mailbox_of_that_address_is_left_alone(
    api_client, anon_client, other_account, oauth_provider
):
    provider = oauth_provider()
    theirs = CredentialFactory(account=other_account, from_email=OWNER)
    credential = connect(api_client, anon_client, provider)
    assert credential.pk != theirs.pk
    theirs.refresh_from_db()
    assert theirs.auth_method == "password" and theirs.oauth_refresh_token == ""


# --- PATCH of an OAuth mailbox -----------------------------------------------------------


def test_an_oauth_mailbox_takes_other_hosts_without_passwords(
    api_client, anon_client, oauth_provider
):
    provider = oauth_provider()
    credential = connect(api_client, anon_client, provider)
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"imap_host": "imap.example.com", "imap_port": 1993, "daily_limit": 3},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert response.json()["oauth_status"] == "connected"


def test_a_patch_never_puts_back_tokens_a_refresh_replaced(
    api_client, anon_client, oauth_provider, monkeypatch
):
    provider = oauth_provider()
    credential = connect(api_client, anon_client, provider)
    from outreach.mailboxes import services

    update = services.credential_update

    def update_after_a_refresh(*, credential, data):
        # A worker refreshes between the PATCH's read and its write.
        SmtpCredential.objects.filter(pk=credential.pk).update(oauth_access_token="newer")
        return update(credential=credential, data=data)

    monkeypatch.setattr(services, "credential_update", update_after_a_refresh)
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"daily_limit": 3}, format="json"
    )
    assert response.status_code == 200
    credential.refresh_from_db()
    assert (credential.daily_limit, credential.oauth_access_token) == (3, "newer")
