"""/smtp_credentials: CRUD, write-only encrypted secrets, re-enabling."""

import logging

import pytest
from django.db import connection

from config.crypto import text_decrypt as secret_decrypt
from outreach.mailboxes.models import SmtpCredential
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


def test_read_only_fields_are_ignored(api_client):
    created = create(api_client).json()
    response = api_client.patch(
        f"/smtp_credentials/{created['id']}",
        {"sent_count": 99, "bounced_count": 5, "relay_webhook_url": "http://evil"},
        format="json",
    )
    body = response.json()
    assert body["sent_count"] == 0 and body["bounced_count"] == 0
    assert body["relay_webhook_url"].startswith("http://testserver/inbound/relay/")


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
