"""verify() on deliveries the service really made: a webhook registered through the SDK,
an event emitted by another process, delivered by a real worker to a real receiver."""

import json

import pytest
from outreach_sdk import Client, webhooks

from tests.webhooks.test_e2e_delivery import emit_from_another_process

# A made-up event payload, emitted to exercise delivery (tests/support/event_schemas.py).
pytestmark = [pytest.mark.e2e, pytest.mark.synthetic_events]


def test_verify_accepts_what_the_service_signed_and_nothing_else(
    service_url, sdk_key, sdk_account, receiver, celery_worker, monkeypatch
):
    client = Client(api_key=sdk_key, base_url=service_url)
    webhook = client.webhooks.create(url=receiver.url, event_filters=["campaign.paused"])
    celery_worker()

    emit_from_another_process(sdk_account.id)
    (delivered,) = receiver.wait_for(1, timeout=30)
    header = delivered.headers[webhooks.HEADER]

    event = webhooks.verify(delivered.body, header, webhook.secret)
    assert (event["type"], event["account_id"]) == ("campaign.paused", str(sdk_account.id))
    assert event == json.loads(delivered.body)

    tampered = delivered.body.replace(b"all_credentials_disabled", b"manual")
    with pytest.raises(webhooks.SignatureVerificationError, match="does not match"):
        webhooks.verify(tampered, header, webhook.secret)
    rotated = client.webhooks.rotate_secret(webhook.id).secret
    with pytest.raises(webhooks.SignatureVerificationError, match="does not match"):
        webhooks.verify(delivered.body, header, rotated)

    # The same delivery, read 301 seconds after it was signed.
    signed_at = int(header.split(",")[0].removeprefix("t="))
    monkeypatch.setattr(webhooks, "_now", lambda: signed_at + 301)
    with pytest.raises(webhooks.SignatureVerificationError, match="300 seconds"):
        webhooks.verify(delivered.body, header, webhook.secret)
    assert webhooks.verify(delivered.body, header, webhook.secret, tolerance=400)["id"]
    assert [d.status_code for d in client.webhooks.deliveries(webhook.id)] == [200]
