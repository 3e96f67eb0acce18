"""The signup address proof: the email signup sends, the page its link opens, a new link
(POST /signup/verification), and the 403 email_unverified of dispatch and outreach until
the address is proven (SIGNUP_EMAIL_VERIFICATION)."""

import re
from datetime import timedelta

import pytest
from django.core import signing
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts import verification
from accounts.models import Account
from accounts.verification import token_make
from config.api.errors import ERROR_CODES
from outreach.models.campaigns import CampaignStep
from outreach.models.sending import Enrollment
from tests.accounts.factories import AccountFactory
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = pytest.mark.django_db

LINK = re.compile(r"http://testserver/signup/verify/(\S+)")


@pytest.fixture
def verifying(settings):
    settings.SIGNUP_EMAIL_VERIFICATION = True
    return settings


def signup(client, email="owner@example.com"):
    return client.post("/signup", {"email": email}, format="json")


def link_token(message) -> str:
    match = LINK.search(message.body)
    assert match, message.body
    return match.group(1)


# --- the email signup sends -------------------------------------------------------------------


def test_signup_emails_the_address_a_link(
    anon_client, verifying, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = signup(anon_client, "Owner@Example.com")
    assert response.status_code == 201, response.content
    assert set(response.json()) == {"account_id", "plan_slug", "api_key"}  # SPEC's shape
    [message] = mailoutbox
    assert message.to == ["Owner@Example.com"]
    assert message.subject == "Confirm your email address"
    assert message.from_email == verifying.DEFAULT_FROM_EMAIL
    assert "works for 3 days" in message.body
    assert "POST http://testserver/signup/verification" in message.body
    account = Account.objects.get(pk=response.json()["account_id"])
    assert account.email_verified_at is None
    assert verification.token_account(link_token(message)) == account


def test_without_the_setting_signup_sends_nothing(
    anon_client, settings, mailoutbox, django_capture_on_commit_callbacks
):
    settings.SIGNUP_EMAIL_VERIFICATION = False
    with django_capture_on_commit_callbacks(execute=True):
        assert signup(anon_client).status_code == 201
    assert mailoutbox == []


def test_the_email_goes_through_the_configured_smtp_server(
    anon_client, verifying, smtp_sink, django_capture_on_commit_callbacks
):
    sink = smtp_sink()
    verifying.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    verifying.EMAIL_HOST, verifying.EMAIL_PORT = sink.host, sink.port
    verifying.EMAIL_USE_TLS = verifying.EMAIL_USE_SSL = False
    with django_capture_on_commit_callbacks(execute=True):
        assert signup(anon_client, "wire@example.com").status_code == 201
    [received] = sink.wait_for(1)
    assert received.message["To"] == "wire@example.com"
    assert "/signup/verify/" in received.message.get_content()


def test_a_mail_server_that_fails_never_fails_the_signup(
    anon_client, verifying, django_capture_on_commit_callbacks, caplog
):
    from tests.support.ports import free_port

    verifying.EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
    verifying.EMAIL_HOST, verifying.EMAIL_PORT = "127.0.0.1", free_port()  # nothing listens
    with django_capture_on_commit_callbacks(execute=True):
        response = signup(anon_client, "unlucky@example.com")
    assert response.status_code == 201, response.content
    assert "verification email not sent" in caplog.text and "after 3 attempts" in caplog.text
    assert Account.objects.get(email="unlucky@example.com").email_verified_at is None


# --- the page the link opens -----------------------------------------------------------------


def test_opening_the_link_proves_nothing_until_the_button_is_pressed(anon_client, account):
    path = f"/signup/verify/{token_make(account=account)}"
    page = anon_client.get(path)
    assert page.status_code == 200
    assert page["Content-Type"].startswith("text/html")
    assert "no-store" in page["Cache-Control"] or "max-age=0" in page["Cache-Control"]
    html = page.content.decode()
    assert account.email in html and f'action="{path}"' in html
    assert anon_client.head(path).status_code == 200
    account.refresh_from_db()
    assert account.email_verified_at is None  # a mail scanner's fetch proves nothing

    done = anon_client.post(path)
    assert done.status_code == 200
    assert "is confirmed" in done.content.decode()
    account.refresh_from_db()
    first = account.email_verified_at
    assert first is not None

    # Again, or the page once more: it says so and keeps the first time.
    assert anon_client.post(path).status_code == 200
    assert "is confirmed" in anon_client.get(path).content.decode()
    account.refresh_from_db()
    assert account.email_verified_at == first


@pytest.mark.parametrize(
    "token",
    [
        "nonsense",
        "a" * 500,
        "%00%ff",
        signing.dumps({"a": "not-hex", "e": "x@example.com"}, salt=verification.SALT),
        signing.dumps(["a", "list"], salt=verification.SALT),
        signing.dumps({"a": "0" * 32, "e": "x@example.com"}, salt="another.purpose"),
    ],
    # Fixed ids: the signed ones carry a timestamp, and pytest-xdist's processes must
    # collect the same names.
    ids=["nonsense", "long", "nul", "not-hex", "a-list", "other-purpose"],
)
def test_a_bad_token_is_a_404_page_and_changes_nothing(anon_client, account, token):
    for method in (anon_client.get, anon_client.post):
        response = method(f"/signup/verify/{token}")
        assert response.status_code == 404
        assert "This link is not valid." in response.content.decode()
    account.refresh_from_db()
    assert account.email_verified_at is None


def test_a_tampered_token_proves_nothing(anon_client, account):
    token = token_make(account=account)
    tampered = token[:-1] + ("A" if token[-1] != "A" else "B")
    assert anon_client.post(f"/signup/verify/{tampered}").status_code == 404
    account.refresh_from_db()
    assert account.email_verified_at is None


def test_an_expired_link_says_so_and_how_to_get_another(anon_client, account, monkeypatch):
    monkeypatch.setattr(verification, "LINK_MAX_AGE", timedelta(seconds=-1))
    response = anon_client.post(f"/signup/verify/{token_make(account=account)}")
    assert response.status_code == 404
    html = response.content.decode()
    assert "This link has expired." in html
    assert "POST http://testserver/signup/verification" in html
    account.refresh_from_db()
    assert account.email_verified_at is None


def test_a_link_for_an_address_the_account_no_longer_has_proves_nothing(anon_client, account):
    token = token_make(account=account)
    Account.objects.filter(pk=account.pk).update(email="changed@example.com")
    response = anon_client.post(f"/signup/verify/{token}")
    assert response.status_code == 404
    assert "no longer has" in response.content.decode()
    account.refresh_from_db()
    assert account.email_verified_at is None


def test_the_address_matches_case_insensitively(anon_client):
    account = AccountFactory(email="Mixed@Example.com")
    token = token_make(account=account)
    Account.objects.filter(pk=account.pk).update(email="mixed@example.com")
    assert anon_client.post(f"/signup/verify/{token}").status_code == 200
    account.refresh_from_db()
    assert account.email_verified_at is not None


def test_a_deleted_account_link_is_a_404_page(anon_client, account):
    token = token_make(account=account)
    account.delete()
    assert anon_client.get(f"/signup/verify/{token}").status_code == 404


def test_other_methods_are_405_in_the_envelope(anon_client, account):
    response = anon_client.put(f"/signup/verify/{token_make(account=account)}")
    assert_envelope(response, 405, "method_not_allowed")
    assert response["Allow"] == "GET, HEAD, POST"


# --- GET and POST /signup/verification -----------------------------------------------------


def test_it_shows_whether_the_address_is_proven(api_client, account, verifying):
    body = api_client.get("/signup/verification").json()
    assert body == {
        "email": account.email,
        "email_verified": False,
        "email_verified_at": None,
        "verification_required": True,
    }
    Account.objects.filter(pk=account.pk).update(email_verified_at=timezone.now())
    body = api_client.get("/signup/verification").json()
    assert body["email_verified"] is True and body["email_verified_at"].endswith("Z")


def test_post_sends_a_new_link(api_client, account, mailoutbox, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post("/signup/verification")
    assert response.status_code == 200, response.content
    assert response.json()["verification_sent"] is True
    assert response["RateLimit-Policy"] == '"verification_email";q=5;w=3600'
    [message] = mailoutbox
    assert message.to == [account.email]
    assert anon_post(f"/signup/verify/{link_token(message)}").status_code == 200
    account.refresh_from_db()
    assert account.email_verified_at is not None


def anon_post(path):
    from rest_framework.test import APIClient

    return APIClient().post(path)


def test_post_sends_nothing_once_the_address_is_proven(
    api_client, account, mailoutbox, django_capture_on_commit_callbacks
):
    Account.objects.filter(pk=account.pk).update(email_verified_at=timezone.now())
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post("/signup/verification")
    assert response.status_code == 200
    assert (response.json()["email_verified"], response.json()["verification_sent"]) == (
        True,
        False,
    )
    assert mailoutbox == []


def test_new_links_are_limited_to_five_an_hour_per_account(
    api_client, account, other_client, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(5):
            assert api_client.post("/signup/verification").status_code == 200
        body = assert_envelope(api_client.post("/signup/verification"), 429, "rate_limited")
    assert body["details"] == {"limit": 5, "period": 3600}
    assert len(mailoutbox) == 5
    # Reading is not limited by it, nor is another account.
    assert api_client.get("/signup/verification").status_code == 200
    assert other_client.post("/signup/verification").status_code == 200


def test_it_needs_a_key(anon_client):
    for method in (anon_client.get, anon_client.post):
        assert_envelope(method("/signup/verification"), 401, "authentication_required")


# --- the gate: dispatch and outreach ---------------------------------------------------------


def _dispatchable(account):
    campaign = CampaignFactory(account=account)
    EnrollmentFactory(campaign=campaign, contact=ContactFactory(account=account))
    return campaign


def _outreach(client, campaign, **extra):
    body = {"campaign_id": str(campaign.pk), "contact": {"email": "ada@example.org"}}
    return client.post("/outreaches", body, format="json", **extra)


def test_an_unproven_account_may_not_dispatch(api_client, account, verifying):
    campaign = _dispatchable(account)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    body = assert_envelope(response, 403, "email_unverified")
    assert account.email in body["message"]
    assert "POST /signup/verification" in body["message"]
    assert body["details"] == {
        "email": account.email,
        "resend_url": "http://testserver/signup/verification",
    }
    assert Enrollment.objects.get(campaign=campaign).status == "pending"

    Account.objects.filter(pk=account.pk).update(email_verified_at=timezone.now())
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["dispatched"] == 1


def test_an_unproven_account_may_not_start_outreach(api_client, account, verifying):
    campaign = CampaignFactory(account=account)
    assert_envelope(_outreach(api_client, campaign), 403, "email_unverified")
    assert not Enrollment.objects.filter(campaign=campaign).exists()
    assert not campaign.account.contacts.exists()


def test_the_refusal_is_not_kept_for_the_idempotency_key(api_client, account, verifying):
    campaign = CampaignFactory(account=account)
    key = {"HTTP_IDEMPOTENCY_KEY": "first-outreach"}
    assert_envelope(_outreach(api_client, campaign, **key), 403, "email_unverified")
    Account.objects.filter(pk=account.pk).update(email_verified_at=timezone.now())
    response = _outreach(api_client, campaign, **key)
    assert response.status_code == 201, response.content
    assert "Idempotent-Replay" not in response


def test_the_refusal_counts_against_the_rate_limit(api_client, account, verifying):
    campaign = CampaignFactory(account=account)
    response = _outreach(api_client, campaign)
    assert response.status_code == 403
    assert response["RateLimit"].startswith('"api_key";r=59;')


def test_everything_else_works_before_the_address_is_proven(api_client, account, verifying):
    campaign = CampaignFactory(account=account)
    assert api_client.get(f"/campaigns/{campaign.pk}").status_code == 200
    assert (
        api_client.post("/contacts", {"email": "x@example.org"}, format="json").status_code == 201
    )
    # Another account's campaign: the 403 says nothing about it.
    foreign = CampaignFactory()
    response = api_client.post(f"/campaigns/{foreign.pk}/dispatch", {"all_pending": True})
    assert_envelope(response, 403, "email_unverified")


def test_without_the_setting_an_unproven_account_dispatches(api_client, account, settings):
    settings.SIGNUP_EMAIL_VERIFICATION = False
    campaign = _dispatchable(account)
    CampaignStep.objects.filter(campaign=campaign).update(delay_minutes=5)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert _outreach(api_client, campaign).status_code == 201


def test_the_whole_way_from_signup_to_a_dispatch(
    anon_client, verifying, mailoutbox, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        response = signup(anon_client, "whole@example.com")
    client = client_for(response.json()["api_key"]["plaintext"])
    account = Account.objects.get(pk=response.json()["account_id"])
    campaign = CampaignFactory(account=account)
    assert_envelope(_outreach(client, campaign), 403, "email_unverified")
    token = link_token(mailoutbox[0])
    assert anon_client.post(f"/signup/verify/{token}").status_code == 200
    assert _outreach(client, campaign).status_code == 201


# --- the code, the admin, the migration -----------------------------------------


def test_the_code_is_registered_with_its_page(anon_client):
    assert ERROR_CODES["email_unverified"].status == 403
    page = anon_client.get("/docs/errors/email_unverified")
    assert page.status_code == 200
    assert "POST /signup/verification" in page.content.decode()


def test_the_admin_shows_and_sets_the_verified_state(admin_client):
    unproven = AccountFactory(email="unproven@example.com")
    AccountFactory(email="done@example.com", email_verified_at=timezone.now())
    listing = admin_client.get(
        "/admin/accounts/account/", {"email_verified_at__isempty": "1"}
    ).content.decode()
    assert "unproven@example.com" in listing and "done@example.com" not in listing
    page = admin_client.get(f"/admin/accounts/account/{unproven.pk}/change/").content.decode()
    assert "Email verified at" in page
    response = admin_client.post(
        "/admin/accounts/account/",
        {"action": "email_mark_verified", "_selected_action": [str(unproven.pk)]},
    )
    assert response.status_code == 302
    unproven.refresh_from_db()
    assert unproven.email_verified_at is not None


@pytest.mark.django_db(transaction=True)
def test_the_migration_marks_the_accounts_of_before_verified():
    """0006: accounts that exist at deploy predate the rule; new ones start unproven."""
    before = [("accounts", "0005_idempotency_body_text")]
    after = [("accounts", "0006_email_verified_at")]
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        old_apps = executor.loader.project_state(before).apps
        OldAccount = old_apps.get_model("accounts", "Account")
        Plan = old_apps.get_model("plans", "Plan")
        OldAccount.objects.create(email="old@example.com", plan=Plan.objects.get(slug="free"))
        executor = MigrationExecutor(connection)
        executor.migrate(after)
        # The model as of 0006: later migrations add columns that are not there yet.
        NewAccount = executor.loader.project_state(after).apps.get_model("accounts", "Account")
        assert NewAccount.objects.get(email="old@example.com").email_verified_at is not None
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
