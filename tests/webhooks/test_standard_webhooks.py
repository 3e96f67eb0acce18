"""Standard Webhooks headers on every delivery, checked with the verifiers receivers
already run: the `standardwebhooks` package and Svix's, unchanged, against a real
delivery to a real local receiver. SPEC.md's X-Service-Signature is still there, as
it was."""

import base64
import json

import pytest
import stripe
import svix.webhooks
from standardwebhooks.webhooks import Webhook as StandardWebhook
from standardwebhooks.webhooks import WebhookVerificationError

from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit
from webhooks.models import DeliveryJob
from webhooks.secrets import secret_generate

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]


@pytest.fixture
def delivered(account, receiver, api_client, django_capture_on_commit_callbacks):
    """A webhook registered through the API (a secret of today's format) and one
    event delivered to the receiver: (secret, request, job)."""
    response = api_client.post("/webhooks", {"webhook": {"url": receiver.url}}, format="json")
    assert response.status_code == 201
    secret = response.json()["secret"]
    with django_capture_on_commit_callbacks(execute=True):
        event = event_emit(account, "enrollment.sent", {"enrollment_id": "e1"})
    (request,) = receiver.wait_for(1)
    return secret, request, DeliveryJob.objects.get(event=event)


def test_new_secrets_are_whsec_and_standard_base64_of_32_bytes():
    secret = secret_generate()
    assert secret.startswith("whsec_")
    assert len(base64.b64decode(secret.removeprefix("whsec_"), validate=True)) == 32


def test_the_standardwebhooks_package_verifies_a_delivery(delivered):
    secret, request, job = delivered
    assert request.headers["webhook-id"] == str(job.id) == json.loads(request.body)["id"]
    assert request.headers["webhook-signature"].startswith("v1,")
    payload = StandardWebhook(secret).verify(request.body, dict(request.headers))
    assert payload["type"] == "enrollment.sent"


def test_svix_verifier_accepts_a_delivery_unchanged(delivered):
    secret, request, _ = delivered
    svix.webhooks.Webhook(secret).verify(request.body, dict(request.headers))


def test_the_x_service_signature_is_as_before(delivered):
    secret, request, _ = delivered
    header = request.headers["X-Service-Signature"]
    assert header == f"t={request.headers['webhook-timestamp']},v1={header.split('v1=')[1]}"
    assert stripe.WebhookSignature.verify_header(
        request.body.decode(), header, secret, tolerance=300
    )


def test_a_wrong_secret_a_tampered_body_or_id_fail_verification(delivered):
    secret, request, _ = delivered
    headers = dict(request.headers)
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(secret_generate()).verify(request.body, headers)
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(secret).verify(request.body.replace(b"e1", b"e2"), headers)
    with pytest.raises(WebhookVerificationError):
        svix.webhooks.Webhook(secret).verify(request.body, headers | {"webhook-id": "other"})


def test_a_rotated_secret_signs_the_standard_header_too(
    account, receiver, api_client, django_capture_on_commit_callbacks
):
    webhook = WebhookFactory(account=account, url=receiver.url, secret=secret_generate())
    old = webhook.secret
    new = api_client.post(f"/webhooks/{webhook.id}/rotate_secret").json()["secret"]
    with django_capture_on_commit_callbacks(execute=True):
        event_emit(account, "campaign.paused", {"campaign_id": "c1"})
    (request,) = receiver.wait_for(1)
    StandardWebhook(new).verify(request.body, dict(request.headers))
    with pytest.raises(WebhookVerificationError):
        StandardWebhook(old).verify(request.body, dict(request.headers))
