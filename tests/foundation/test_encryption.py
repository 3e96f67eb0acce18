"""Encryption at rest with key rotation (FIELD_ENCRYPTION_KEY may list several keys)."""

import base64
import io
import json
import os

import pytest
from django.core.management import call_command
from django.db import connection, models
from django.db.migrations.executor import MigrationExecutor
from django.test.utils import isolate_apps
from django.utils import timezone

import config.crypto
from accounts.models import IdempotencyRecord
from config.crypto import DecryptionFailed, EncryptedTextField, text_decrypt, text_encrypt
from outreach.models.mailboxes import SmtpCredential
from tests.outreach.factories import CredentialFactory
from tests.support.stored import stored_value
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db

# Every encrypted field of the project: encryption_rotate finds them all by itself.
ENCRYPTED_FIELDS = {
    ("accounts.IdempotencyRecord", "response_body"),
    ("outreach.SmtpCredential", "smtp_password"),
    ("outreach.SmtpCredential", "imap_password"),
    ("outreach.SmtpCredential", "relay_signing_key"),
    ("outreach.SmtpCredential", "oauth_refresh_token"),
    ("outreach.SmtpCredential", "oauth_access_token"),
    ("outreach.OAuthAuthorization", "code_verifier"),
    ("webhooks.Webhook", "secret"),
}


def _key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def _stored_smtp_password(pk) -> str:
    """The column as stored (the Fernet token), not as the model field decrypts it."""
    return stored_value(SmtpCredential.objects.get(pk=pk), "smtp_password")


def _rotate() -> str:
    out = io.StringIO()
    call_command("encryption_rotate", stdout=out)
    return out.getvalue()


def test_the_first_key_encrypts_and_every_key_decrypts(settings):
    old, new = _key(), _key()
    settings.FIELD_ENCRYPTION_KEY = old
    token = text_encrypt("hunter2")
    settings.FIELD_ENCRYPTION_KEY = f"{new},{old}"
    assert text_decrypt(token) == "hunter2"
    fresh = text_encrypt("hunter2")
    settings.FIELD_ENCRYPTION_KEY = new
    assert text_decrypt(fresh) == "hunter2"
    with pytest.raises(DecryptionFailed) as caught:
        text_decrypt(token)
    assert token not in str(caught.value) and old not in str(caught.value)


def test_rotation_rewrites_every_stored_secret_under_the_new_key(settings, account, api_client):
    old, new = _key(), _key()
    settings.FIELD_ENCRYPTION_KEY = old
    credential = CredentialFactory(
        account=account, smtp_password="smtp-pw", relay_signing_key="relay-key"
    )
    webhook = WebhookFactory(account=account, secret="whsec_rotate_me")
    replayed = api_client.post(
        "/api_keys", {"label": "k"}, format="json", HTTP_IDEMPOTENCY_KEY="rot-1"
    )
    before = _stored_smtp_password(credential.pk)

    settings.FIELD_ENCRYPTION_KEY = f"{new},{old}"
    call_command("encryption_rotate", stdout=open(os.devnull, "w"))  # noqa: SIM115
    settings.FIELD_ENCRYPTION_KEY = new  # the old key is gone

    assert _stored_smtp_password(credential.pk) != before
    stored = SmtpCredential.objects.get(pk=credential.pk)
    assert (stored.smtp_password, stored.relay_signing_key) == ("smtp-pw", "relay-key")
    assert Webhook.objects.get(pk=webhook.pk).secret == "whsec_rotate_me"
    again = api_client.post(
        "/api_keys", {"label": "k"}, format="json", HTTP_IDEMPOTENCY_KEY="rot-1"
    )
    assert again["Idempotent-Replay"] == "true"
    assert again.content == replayed.content


def test_the_webhook_secret_is_stored_as_a_token():
    webhook = WebhookFactory(secret="whsec_stored_as_a_token")
    token = stored_value(webhook, "secret")
    assert token.startswith("gAAAAA") and "whsec_stored_as_a_token" not in token
    assert text_decrypt(token) == "whsec_stored_as_a_token"
    assert Webhook.objects.get(pk=webhook.pk).secret == "whsec_stored_as_a_token"


def test_the_idempotent_response_body_is_stored_as_a_token(api_client):
    response = api_client.post(
        "/api_keys", {"label": "k"}, format="json", HTTP_IDEMPOTENCY_KEY="stored-1"
    )
    plaintext = response.json()["plaintext"]
    token = stored_value(IdempotencyRecord.objects.get(key="stored-1"), "response_body")
    assert token.startswith("gAAAAA") and plaintext not in token
    assert text_decrypt(token).encode() == response.content


def test_webhook_secrets_and_idempotent_bodies_survive_a_key_rotation(settings, api_client):
    old, new = _key(), _key()
    settings.FIELD_ENCRYPTION_KEY = old
    webhook = WebhookFactory(secret="whsec_survives")
    first = api_client.post("/api_keys", {"label": "k"}, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    record = IdempotencyRecord.objects.get(key="s-1")
    before = stored_value(webhook, "secret"), stored_value(record, "response_body")

    settings.FIELD_ENCRYPTION_KEY = f"{new},{old}"
    report = _rotate()
    settings.FIELD_ENCRYPTION_KEY = new  # the old key is gone

    after = stored_value(webhook, "secret"), stored_value(record, "response_body")
    assert after[0] != before[0] and after[1] != before[1]
    assert text_decrypt(after[0]) == "whsec_survives"
    assert text_decrypt(after[1]).encode() == first.content
    assert "webhooks.Webhook.secret: 1 re-encrypted" in report.splitlines()
    assert "accounts.IdempotencyRecord.response_body: 1 re-encrypted" in report.splitlines()
    assert Webhook.objects.get(pk=webhook.pk).secret == "whsec_survives"
    again = api_client.post("/api_keys", {"label": "k"}, format="json", HTTP_IDEMPOTENCY_KEY="s-1")
    assert again["Idempotent-Replay"] == "true" and again.content == first.content


def test_rotation_reports_each_field_found_in_the_app_registry(account):
    CredentialFactory(account=account, smtp_password="pw", relay_signing_key="")
    found = {
        (model._meta.label, name)
        for model, names in config.crypto.encrypted_fields().items()
        for name in names
    }
    assert found == ENCRYPTED_FIELDS
    report = _rotate().splitlines()
    assert {line.split(":")[0] for line in report} == {f"{m}.{f}" for m, f in ENCRYPTED_FIELDS}
    assert "outreach.SmtpCredential.smtp_password: 1 re-encrypted" in report
    assert "outreach.SmtpCredential.relay_signing_key: 0 re-encrypted" in report


@isolate_apps("tests")
def test_rotation_finds_a_field_of_a_model_it_was_not_told_about(settings, monkeypatch):
    class Vault(models.Model):
        secret = EncryptedTextField(blank=True, default="")

        class Meta:
            app_label = "tests"

        def __str__(self) -> str:
            return "vault"

    installed = config.crypto.apps.get_models
    monkeypatch.setattr(config.crypto.apps, "get_models", lambda: [*installed(), Vault])
    with connection.schema_editor() as editor:
        editor.create_model(Vault)
    old, new = _key(), _key()
    settings.FIELD_ENCRYPTION_KEY = old
    vault = Vault.objects.create(secret="in the vault")
    before = stored_value(vault, "secret")

    settings.FIELD_ENCRYPTION_KEY = f"{new},{old}"
    report = _rotate()
    settings.FIELD_ENCRYPTION_KEY = new

    assert "tests.Vault.secret: 1 re-encrypted" in report.splitlines()
    assert stored_value(vault, "secret") != before
    assert Vault.objects.get(pk=vault.pk).secret == "in the vault"


@pytest.mark.django_db(transaction=True)
def test_the_idempotency_migration_keeps_each_stored_token(account):
    """0005 turns the bytes column into text: each token is copied as it is, both ways."""
    before = [("accounts", "0004_keyset_page_indexes")]
    after = [("accounts", "0005_idempotency_body_text")]
    body = json.dumps({"plaintext": "sk_migrated"})
    token = text_encrypt(body)
    now = timezone.now()
    executor = MigrationExecutor(connection)
    try:
        executor.migrate(before)
        old_apps = executor.loader.project_state(before).apps
        OldRecord = old_apps.get_model("accounts", "IdempotencyRecord")
        fields = {"account_id": account.pk, "fingerprint": "f", "method": "POST", "path": "/p"}
        done = OldRecord.objects.create(
            key="done", status="completed", response_status=201, locked_at=now, created_at=now,
            response_body_encrypted=token.encode(), **fields,
        )  # fmt: skip
        OldRecord.objects.create(key="running", locked_at=now, created_at=now, **fields)

        executor = MigrationExecutor(connection)
        executor.migrate(after)
        record = IdempotencyRecord.objects.get(key="done")
        assert stored_value(record, "response_body") == token
        assert record.response_body == body
        assert IdempotencyRecord.objects.get(key="running").response_body == ""

        executor = MigrationExecutor(connection)
        executor.migrate(before)
        assert bytes(stored_value(done, "response_body_encrypted")) == token.encode()
    finally:
        executor = MigrationExecutor(connection)
        executor.migrate(executor.loader.graph.leaf_nodes())
