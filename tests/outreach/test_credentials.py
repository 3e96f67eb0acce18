"""/smtp_credentials: CRUD, write-only encrypted secrets, re-enabling."""

import logging
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from config.crypto import text_decrypt as secret_decrypt
from outreach.models.mailboxes import SmtpCredential
from tests.outreach.factories import CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db

SECRETS = ("smtp_password", "imap_password", "relay_signing_key")


def create(client, **overrides):
    body = {
        "from_email": "sales@example.com",
        "from_name": "Sales",
        "smtp_host": "smtp.example.com",
        "smtp_username": "sales@example.com",
        "smtp_password": "s3cret-smtp",
        **overrides,
    }
    return client.post("/smtp_credentials", body, format="json")


def raw_column(credential_id, column):
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {column} FROM outreach_smtpcredential WHERE id = %s",  # noqa: S608
            [credential_id],
        )
        return cursor.fetchone()[0]


def test_it_creates_with_defaults_and_hides_secrets(api_client):
    response = create(api_client)
    assert response.status_code == 201, response.content
    body = response.json()
    for name in SECRETS:
        assert name not in body
    assert body["smtp_password_set"] is True
    assert body["imap_password_set"] is False
    assert body["smtp_security"] == "starttls"
    assert body["smtp_port"] == 587
    assert body["daily_limit"] == 50
    assert body["sent_count"] == 0 and body["bounced_count"] == 0
    assert body["disabled_at"] is None and body["disabled_reason"] is None
    assert body["relay_provider"] is None
    assert body["relay_webhook_url"] == f"http://testserver/inbound/relay/{body['id']}"
    assert body["created_at"].endswith("Z")


def test_ssl_defaults_to_port_465(api_client):
    assert create(api_client, smtp_security="ssl").json()["smtp_port"] == 465
    assert create(api_client, smtp_security="none").json()["smtp_port"] == 25
    assert create(api_client, smtp_security="ssl", smtp_port=2465).json()["smtp_port"] == 2465


def test_secrets_are_encrypted_at_rest(api_client):
    body = create(
        api_client,
        imap_host="imap.example.com",
        imap_username="sales",
        imap_password="s3cret-imap",
        relay_provider="mailgun",
        relay_signing_key="key-mailgun",
    ).json()
    credential = SmtpCredential.objects.get(pk=body["id"])
    assert credential.smtp_password == "s3cret-smtp"
    assert credential.imap_password == "s3cret-imap"
    assert credential.relay_signing_key == "key-mailgun"
    assert body["imap_port"] == 993
    for column, plaintext in [
        ("smtp_password", "s3cret-smtp"),
        ("imap_password", "s3cret-imap"),
        ("relay_signing_key", "key-mailgun"),
    ]:
        stored = raw_column(credential.pk, column)
        assert plaintext not in stored
        assert secret_decrypt(stored) == plaintext


def test_secrets_never_appear_in_list_get_or_logs(api_client, caplog):
    caplog.set_level(logging.DEBUG)
    created = create(api_client, smtp_password="pw-in-logs?").json()
    for response in (
        api_client.get("/smtp_credentials"),
        api_client.get(f"/smtp_credentials/{created['id']}"),
        api_client.patch(
            f"/smtp_credentials/{created['id']}", {"smtp_password": "pw-in-logs?"}, format="json"
        ),
    ):
        assert response.status_code == 200
        assert b"pw-in-logs?" not in response.content
    assert "pw-in-logs?" not in caplog.text


@pytest.mark.parametrize(
    ("overrides", "fields"),
    [
        ({"from_email": "not-an-email"}, {"from_email"}),
        ({"from_email": ""}, {"from_email"}),
        ({"smtp_host": ""}, {"smtp_host"}),
        ({"smtp_security": "tls"}, {"smtp_security"}),
        ({"smtp_port": 70000}, {"smtp_port"}),
        ({"daily_limit": -1}, {"daily_limit"}),
        ({"imap_host": "imap.example.com"}, {"imap_username", "imap_password"}),
        ({"relay_provider": "postmark", "relay_signing_key": "k"}, {"relay_provider"}),
        ({"relay_provider": "sendgrid"}, {"relay_signing_key"}),
    ],
)
def test_invalid_bodies_are_validation_failed(api_client, overrides, fields):
    assert_fields(create(api_client, **overrides), *fields)


def test_patch_updates_and_keeps_unspecified_secret(api_client):
    created = create(api_client).json()
    response = api_client.patch(
        f"/smtp_credentials/{created['id']}",
        {"daily_limit": 200, "from_name": "Team"},
        format="json",
    )
    assert response.status_code == 200
    assert response.json()["daily_limit"] == 200
    credential = SmtpCredential.objects.get(pk=created["id"])
    assert credential.smtp_password == "s3cret-smtp"
    api_client.patch(
        f"/smtp_credentials/{created['id']}", {"smtp_password": "rotated"}, format="json"
    )
    credential.refresh_from_db()
    assert credential.smtp_password == "rotated"


def test_read_only_fields_are_refused_when_changed_and_accepted_unchanged(api_client):
    created = create(api_client).json()
    response = api_client.patch(
        f"/smtp_credentials/{created['id']}",
        {"sent_count": 99, "bounced_count": 5},
        format="json",
    )
    assert response.status_code == 422
    assert set(response.json()["details"]["fields"]) == {"sent_count", "bounced_count"}
    response = api_client.patch(
        f"/smtp_credentials/{created['id']}",
        {"sent_count": 0, "bounced_count": 0, "relay_webhook_url": created["relay_webhook_url"]},
        format="json",
    )
    body = response.json()
    assert body["sent_count"] == 0 and body["bounced_count"] == 0
    assert body["relay_webhook_url"].startswith("http://testserver/inbound/relay/")


ENGINE_WRITES = {
    "sent_count": 41,
    "bounced_count": 2,
    "daily_sent_count": 17,
    "imap_uidvalidity": 7,
    "imap_last_uid": 1234,
    "last_error": "535 authentication failed",
}


@pytest.mark.parametrize(
    "change",
    [
        {"from_name": "Team"},
        {"daily_limit": 80, "smtp_password": "rotated"},
        {"min_interval_seconds": 30, "max_interval_seconds": 60},
        {"disabled_at": "2026-02-03T04:05:06Z"},
    ],
    ids=["a-name", "limit-and-secret", "the-pace", "disabled"],
)
def test_a_patch_keeps_what_the_engine_wrote_since_it_read_the_row(
    api_client, account, monkeypatch, change
):
    """The sender, the scheduler and the reply poll write the mailbox's counters, its
    next send and its IMAP place while a PATCH runs: the PATCH writes only what it
    changes, so none of theirs goes back to what the request first read."""
    credential = CredentialFactory(
        account=account,
        imap_host="imap.example.com",
        imap_username="sales@example.com",
        imap_password="s3cret-imap",
        min_interval_seconds=120,
        max_interval_seconds=300,
    )
    from outreach.mailboxes import services

    update = services.credential_update
    next_send = timezone.now() + timedelta(minutes=4)

    def update_after_the_engine_wrote(*, credential, data):
        # Between the request's read of the row and its write: a send, a poll.
        SmtpCredential.objects.filter(pk=credential.pk).update(
            **ENGINE_WRITES, next_send_earliest_at=next_send
        )
        return update(credential=credential, data=data)

    monkeypatch.setattr(services, "credential_update", update_after_the_engine_wrote)
    response = api_client.patch(f"/smtp_credentials/{credential.pk}", change, format="json")

    assert response.status_code == 200, response.content
    assert {name: response.json()[name] for name in ("sent_count", "bounced_count")} == {
        "sent_count": 41,
        "bounced_count": 2,
    }
    credential.refresh_from_db()
    assert {name: getattr(credential, name) for name in ENGINE_WRITES} == ENGINE_WRITES
    if "min_interval_seconds" in change:
        # Rebased from the time the row held (4 minutes away), not from the one the
        # request read (none: it may send now).
        assert credential.next_send_earliest_at is not None
        assert credential.next_send_earliest_at <= timezone.now() + timedelta(seconds=60)
    else:
        assert credential.next_send_earliest_at == next_send
    for name, value in change.items():
        if name == "disabled_at":
            assert credential.disabled_reason == "manual"
        else:
            assert getattr(credential, name) == value


def test_patch_disabled_at_null_re_enables(api_client, account):
    credential = CredentialFactory(
        account=account, disabled_at="2026-01-01T00:00:00Z", disabled_reason="bounce_rate_exceeded"
    )
    before = api_client.get(f"/smtp_credentials/{credential.pk}").json()
    assert before["disabled_reason"] == "bounce_rate_exceeded"
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"disabled_at": None}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["disabled_at"] is None
    assert response.json()["disabled_reason"] is None
    credential.refresh_from_db()
    assert credential.is_enabled and credential.disabled_reason == ""


def test_patch_disabled_at_timestamp_disables_manually(api_client, account):
    credential = CredentialFactory(account=account)
    body = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"disabled_at": "2026-02-03T04:05:06Z"},
        format="json",
    ).json()
    assert body["disabled_at"].startswith("2026-02-03T04:05:06")
    assert body["disabled_reason"] == "manual"


def test_list_and_delete(api_client, account, django_assert_max_num_queries, auth_queries):
    for _ in range(5):
        CredentialFactory(account=account)
    with django_assert_max_num_queries(auth_queries + 3):
        response = api_client.get("/smtp_credentials")
    assert response.status_code == 200
    assert len(response.json()) == 5
    target = response.json()[0]["id"]
    deleted = api_client.delete(f"/smtp_credentials/{target}")
    assert deleted.status_code == 204 and deleted.content == b""
    assert_error(api_client.get(f"/smtp_credentials/{target}"), 404, "credential_not_found")


def test_put_is_not_allowed(api_client, account):
    credential = CredentialFactory(account=account)
    response = api_client.put(f"/smtp_credentials/{credential.pk}", {}, format="json")
    assert_error(response, 405, "method_not_allowed")


def test_patch_imap_host_needs_credentials_unless_stored(api_client, account):
    credential = CredentialFactory(account=account)
    assert_fields(
        api_client.patch(
            f"/smtp_credentials/{credential.pk}", {"imap_host": "imap.example.com"}, format="json"
        ),
        "imap_username",
        "imap_password",
    )
    ok = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"imap_host": "imap.example.com", "imap_username": "u", "imap_password": "p"},
        format="json",
    )
    assert ok.status_code == 200 and ok.json()["imap_port"] == 993
    # Stored secrets satisfy the rule on later PATCHes.
    again = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"imap_security": "starttls"}, format="json"
    )
    assert again.status_code == 200 and again.json()["imap_password_set"] is True
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_last_uid=42, imap_uidvalidity=7)
    api_client.patch(f"/smtp_credentials/{credential.pk}", {"imap_host": ""}, format="json")
    credential.refresh_from_db()
    assert credential.imap_last_uid is None and credential.imap_uidvalidity is None


@pytest.mark.parametrize("value", ["mx.google.com; dmarc=pass", "mx google", ".example", "x" * 256])
def test_a_malformed_authserv_id_is_refused(api_client, account, value):
    credential = CredentialFactory(account=account)
    assert_fields(
        api_client.patch(
            f"/smtp_credentials/{credential.pk}", {"imap_authserv_id": value}, format="json"
        ),
        "imap_authserv_id",
    )
    credential.refresh_from_db()
    assert credential.imap_authserv_id == ""


def test_the_authserv_id_is_set_shown_and_cleared(api_client, account):
    credential = CredentialFactory(account=account)
    url = f"/smtp_credentials/{credential.pk}"
    assert api_client.get(url).json()["imap_authserv_id"] == ""
    set_ = api_client.patch(url, {"imap_authserv_id": "MX.Example.NET"}, format="json")
    assert set_.status_code == 200 and set_.json()["imap_authserv_id"] == "mx.example.net"
    cleared = api_client.patch(url, {"imap_authserv_id": ""}, format="json")
    assert cleared.status_code == 200 and cleared.json()["imap_authserv_id"] == ""


# --- SMTP_REQUIRE_LOGIN: a mailbox that may send logs in --------------------------------------


@pytest.fixture
def login_required(settings):
    settings.SMTP_REQUIRE_LOGIN = True
    return settings


def test_a_mailbox_without_a_login_is_refused(api_client, login_required):
    response = create(api_client, smtp_username="", smtp_password="")
    fields = assert_fields(response, "smtp_username", "smtp_password")
    body = response.json()
    assert body["message"].startswith("smtp_username: A login is required")
    assert "POST /smtp_credentials/oauth" in body["message"]
    assert "SMTP_REQUIRE_LOGIN" in body["message"]
    assert fields["smtp_password"] == fields["smtp_username"]
    assert not SmtpCredential.objects.exists()


@pytest.mark.parametrize(
    ("overrides", "missing"),
    [
        ({"smtp_password": ""}, "smtp_password"),
        ({"smtp_username": "   "}, "smtp_username"),
        ({"smtp_username": None}, "smtp_username"),
    ],
)
def test_half_a_login_is_refused(api_client, login_required, overrides, missing):
    response = create(api_client, **overrides)
    assert response.status_code == 422, response.content
    assert missing in response.json()["details"]["fields"]
    assert not SmtpCredential.objects.exists()


def test_a_mailbox_with_a_login_is_created(api_client, login_required):
    assert create(api_client).status_code == 201


def test_without_the_setting_a_mailbox_needs_no_login(api_client, settings):
    settings.SMTP_REQUIRE_LOGIN = False  # the embedded mode: README's first mailbox
    response = create(api_client, smtp_username="", smtp_password="", smtp_security="none")
    assert response.status_code == 201, response.content


def test_an_update_cannot_drop_the_login(api_client, account, login_required):
    credential = CredentialFactory(account=account)
    for change in ({"smtp_password": ""}, {"smtp_username": ""}):
        response = api_client.patch(f"/smtp_credentials/{credential.pk}", change, format="json")
        assert_fields(response, *change)
    credential.refresh_from_db()
    assert credential.smtp_password == "smtp-secret" and credential.smtp_username


def test_a_stored_mailbox_without_a_login_is_given_one_or_stays_disabled(
    api_client, account, login_required
):
    """Mailboxes stored before the rule (or while it was off)."""
    credential = CredentialFactory(account=account, smtp_username="", smtp_password="")
    url = f"/smtp_credentials/{credential.pk}"
    assert_fields(
        api_client.patch(url, {"daily_limit": 10}, format="json"),
        "smtp_username",
        "smtp_password",
    )
    # Disabling it, and editing it while disabled, need no login: it sends nothing.
    disabled = api_client.patch(url, {"disabled_at": "2026-02-03T04:05:06Z"}, format="json")
    assert disabled.status_code == 200, disabled.content
    assert api_client.patch(url, {"from_name": "Old"}, format="json").status_code == 200
    # Enabling it again does.
    assert_fields(
        api_client.patch(url, {"disabled_at": None}, format="json"),
        "smtp_username",
        "smtp_password",
    )
    enabled = api_client.patch(
        url, {"disabled_at": None, "smtp_username": "u", "smtp_password": "p"}, format="json"
    )
    assert enabled.status_code == 200, enabled.content
    assert enabled.json()["disabled_at"] is None


def test_an_oauth_mailbox_needs_no_password(api_client, account, login_required):
    credential = CredentialFactory(
        account=account, auth_method="oauth_google", oauth_status="connected", smtp_password=""
    )
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}", {"daily_limit": 20}, format="json"
    )
    assert response.status_code == 200, response.content


# --- daily_limit: at most DAILY_LIMIT_MAX ----------------------------------------------------


@pytest.mark.parametrize("value", [2001, 10**6, 10**30])
def test_a_daily_limit_above_the_maximum_is_refused(api_client, value):
    fields = assert_fields(create(api_client, daily_limit=value), "daily_limit")
    assert fields["daily_limit"] == ["Ensure this value is less than or equal to 2000."]
    assert not SmtpCredential.objects.exists()


def test_the_maximum_itself_is_accepted_and_the_operator_sets_it(api_client, account, settings):
    assert create(api_client, daily_limit=2000).json()["daily_limit"] == 2000
    settings.DAILY_LIMIT_MAX = 10
    credential = CredentialFactory(account=account)
    url = f"/smtp_credentials/{credential.pk}"
    assert_fields(api_client.patch(url, {"daily_limit": 11}, format="json"), "daily_limit")
    assert api_client.patch(url, {"daily_limit": 10}, format="json").json()["daily_limit"] == 10


def test_an_oauth_start_checks_the_daily_limit_too(api_client, oauth_provider):
    oauth_provider()
    response = api_client.post(
        "/smtp_credentials/oauth", {"provider": "google", "daily_limit": 2001}, format="json"
    )
    assert_fields(response, "daily_limit")


def test_the_schema_names_the_maximum(api_client):
    schema = api_client.get("/schema", HTTP_ACCEPT="application/json").json()
    field = schema["components"]["schemas"]["Credential"]["properties"]["daily_limit"]
    assert "DAILY_LIMIT_MAX" in field["description"]


def test_a_pace_changed_by_another_request_meanwhile_is_checked_again(
    api_client, account, monkeypatch
):
    """A PATCH of min_interval_seconds alone was checked against the max the request
    read; another request lowered the max since: a 422 naming the field, not the
    database constraint's error, and nothing written."""
    credential = CredentialFactory(
        account=account, min_interval_seconds=10, max_interval_seconds=300
    )
    from outreach.mailboxes import services

    update = services.credential_update

    def update_after_another_request(*, credential, data):
        SmtpCredential.objects.filter(pk=credential.pk).update(max_interval_seconds=30)
        return update(credential=credential, data=data)

    monkeypatch.setattr(services, "credential_update", update_after_another_request)
    response = api_client.patch(
        f"/smtp_credentials/{credential.pk}",
        {"min_interval_seconds": 60, "from_name": "Ops"},
        format="json",
    )

    assert_error(response, 422, "validation_failed")
    assert response.json()["details"]["fields"] == {
        "min_interval_seconds": [
            "min_interval_seconds (60) must not exceed max_interval_seconds (30)."
        ]
    }
    credential.refresh_from_db()
    assert credential.min_interval_seconds == 10 and credential.from_name != "Ops"
