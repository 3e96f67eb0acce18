"""Encryption at rest with key rotation (FIELD_ENCRYPTION_KEY may list several keys)."""

import base64
import os

import pytest
from django.core.management import call_command
from django.db import connection

from config.crypto import DecryptionFailed, text_decrypt, text_encrypt
from outreach.mailboxes.models import SmtpCredential
from tests.outreach.factories import CredentialFactory
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db


def _key() -> str:
    return base64.urlsafe_b64encode(os.urandom(32)).decode()


def _stored_smtp_password(pk) -> str:
    """The column as stored (the Fernet token), not as the model field decrypts it."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT smtp_password FROM outreach_smtpcredential WHERE id = %s",
            [pk.hex if connection.vendor == "sqlite" else pk],
        )
        return cursor.fetchone()[0]


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
