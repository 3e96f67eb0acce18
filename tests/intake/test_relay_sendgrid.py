"""POST /inbound/relay/<credential_id> for a SendGrid credential (signed event webhook)."""

import json
import time

import pytest
from django.test import Client

from accounts.services import api_key_create
from outreach.models.contacts import Contact, Suppression
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.conftest import client_for
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.relay_signing import (
    MAILGUN_KEY,
    SendGridKeys,
    mailgun_body,
    mailgun_failed,
    sendgrid_event,
)
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def keys():
    return SendGridKeys()


def configure(credential_id, key: str, provider: str = "sendgrid") -> None:
    credential = SmtpCredential.objects.get(pk=credential_id)
    credential.relay_provider = provider
    credential.relay_signing_key = key
    credential.save()


@pytest.fixture
def campaign_enrollments(keys):
    """Three sent enrollments of one campaign whose credential uses SendGrid."""
    first = sent_enrollment()
    configure(first.credential_id, keys.public_base64)
    return [
        first,
        sent_enrollment(campaign=first.campaign),
        sent_enrollment(campaign=first.campaign),
    ]


def post(credential_id, body: bytes, headers: dict):
    return Client().post(
        f"/inbound/relay/{credential_id}", data=body, content_type="application/json", **headers
    )


def test_it_applies_a_whole_batch(keys, campaign_enrollments):
    bounced, complained, untouched = campaign_enrollments
    body = json.dumps(
        [
            sendgrid_event("processed", first_message(bounced).message_id),
            sendgrid_event(
                "bounce",
                first_message(bounced).message_id,
                type="bounce",
                status="5.1.1",
                reason="550 5.1.1 The email account that you tried to reach does not exist",
            ),
            sendgrid_event(
                "bounce",
                first_message(untouched).message_id,
                type="blocked",
                status="5.7.1",
                reason="550 5.7.1 Message rejected as spam",
            ),
            sendgrid_event("spamreport", first_message(complained).message_id),
            sendgrid_event("bounce", "unknown@elsewhere.example", type="bounce", status="5.0.0"),
            sendgrid_event("delivered", first_message(untouched).message_id, response="250 OK"),
        ]
    ).encode()
    response = post(bounced.credential_id, body, keys.headers(body))
    assert response.status_code == 200, response.content
    assert response.json() == {"received": 4, "bounced": 2, "unsubscribed": 1, "ignored": 1}

    bounced.refresh_from_db()
    assert bounced.status == Enrollment.Status.BOUNCED
    assert (
        bounced.bounce_reason
        == "550 5.1.1 The email account that you tried to reach does not exist"
    )
    complained.refresh_from_db()
    assert complained.status == Enrollment.Status.UNSUBSCRIBED
    assert (bounced.bounce_type, bounced.bounce_category) == ("hard", "user_unknown")
    assert Contact.objects.get(pk=bounced.contact_id).bounced_at is not None
    # SendGrid's "blocked" refused the message, not the address: a `block` bounce, and
    # the contact stays sendable.
    untouched.refresh_from_db()
    assert untouched.status == Enrollment.Status.BOUNCED
    assert (untouched.bounce_type, untouched.bounce_category) == ("block", "spam_detected")
    assert Contact.objects.get(pk=untouched.contact_id).bounced_at is None
    assert not Suppression.objects.filter(email_lower=untouched.contact.email_lower).exists()
    bounced_events = {e.data["enrollment_id"]: e.data for e in events("enrollment.bounced")}
    assert set(bounced_events) == {str(bounced.pk), str(untouched.pk)}
    assert bounced_events[str(untouched.pk)]["bounce_type"] == "block"
    assert [e.data["enrollment_id"] for e in events("enrollment.unsubscribed")] == [
        str(complained.pk)
    ]


def test_it_accepts_the_key_as_pem(keys, campaign_enrollments):
    enrollment = campaign_enrollments[0]
    configure(enrollment.credential_id, keys.public_pem)
    body = json.dumps([sendgrid_event("spamreport", first_message(enrollment).message_id)]).encode()
    assert post(enrollment.credential_id, body, keys.headers(body)).json()["unsubscribed"] == 1


def test_a_complaint_without_smtp_id_matches_the_recipient(keys, campaign_enrollments):
    enrollment = campaign_enrollments[0]
    event = sendgrid_event("spamreport", "x", email=enrollment.contact.email.upper())
    del event["smtp-id"]
    body = json.dumps([event]).encode()
    assert post(enrollment.credential_id, body, keys.headers(body)).json()["unsubscribed"] == 1


def assert_untouched(enrollments):
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.status == Enrollment.Status.SENT
    assert events() == []


def bounce_body(enrollments) -> bytes:
    return json.dumps(
        [
            sendgrid_event("bounce", first_message(e).message_id, type="bounce", status="5.1.1")
            for e in enrollments
        ]
    ).encode()


def test_a_tampered_body_is_401_and_records_nothing(keys, campaign_enrollments):
    body = bounce_body(campaign_enrollments[:1])
    headers = keys.headers(body)
    tampered = bounce_body(campaign_enrollments)
    assert_error(
        post(campaign_enrollments[0].credential_id, tampered, headers),
        401,
        "invalid_relay_signature",
    )
    assert_untouched(campaign_enrollments)


def test_a_signature_from_another_key_is_401(keys, campaign_enrollments):
    body = bounce_body(campaign_enrollments)
    headers = SendGridKeys().headers(body)
    assert_error(
        post(campaign_enrollments[0].credential_id, body, headers), 401, "invalid_relay_signature"
    )
    assert_untouched(campaign_enrollments)


def test_a_changed_timestamp_is_401(keys, campaign_enrollments):
    body = bounce_body(campaign_enrollments)
    headers = keys.headers(body)
    headers["HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_TIMESTAMP"] = str(int(time.time()) + 1)
    assert_error(
        post(campaign_enrollments[0].credential_id, body, headers), 401, "invalid_relay_signature"
    )
    assert_untouched(campaign_enrollments)


def test_a_stale_signature_is_401(keys, campaign_enrollments):
    body = bounce_body(campaign_enrollments)
    headers = keys.headers(body, timestamp=int(time.time()) - 301)
    assert_error(
        post(campaign_enrollments[0].credential_id, body, headers), 401, "invalid_relay_signature"
    )
    assert_untouched(campaign_enrollments)


@pytest.mark.parametrize("drop", ["signature", "timestamp", "both", "garbage"])
def test_missing_or_garbled_headers_are_401(keys, campaign_enrollments, drop):
    body = bounce_body(campaign_enrollments)
    headers = keys.headers(body)
    if drop in ("signature", "both"):
        del headers["HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_SIGNATURE"]
    if drop in ("timestamp", "both"):
        del headers["HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_TIMESTAMP"]
    if drop == "garbage":
        headers["HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_SIGNATURE"] = "%%%not base64%%%"
    assert_error(
        post(campaign_enrollments[0].credential_id, body, headers), 401, "invalid_relay_signature"
    )
    assert_untouched(campaign_enrollments)


def test_an_unreadable_stored_key_is_401(keys, campaign_enrollments):
    enrollment = campaign_enrollments[0]
    configure(enrollment.credential_id, "not a key")
    body = bounce_body(campaign_enrollments)
    assert_error(
        post(enrollment.credential_id, body, keys.headers(body)), 401, "invalid_relay_signature"
    )


def test_a_mailgun_request_to_a_sendgrid_credential_is_401(keys, campaign_enrollments):
    enrollment = campaign_enrollments[0]
    body = mailgun_body(mailgun_failed(first_message(enrollment).message_id), key=MAILGUN_KEY)
    assert_error(post(enrollment.credential_id, body, {}), 401, "invalid_relay_signature")
    assert_untouched(campaign_enrollments)


def test_a_verified_body_that_is_not_an_array_is_400(keys, campaign_enrollments):
    body = b'{"event": "bounce"}'
    response = post(campaign_enrollments[0].credential_id, body, keys.headers(body))
    assert_error(response, 400, "invalid_json")
    assert_untouched(campaign_enrollments)


def test_a_complaint_from_an_address_with_no_contact_suppresses_it(keys, campaign_enrollments):
    credential_id = campaign_enrollments[0].credential_id
    account = SmtpCredential.objects.get(pk=credential_id).account
    event = sendgrid_event("spamreport", "x", email=" Stranger@Example.org ")
    del event["smtp-id"]
    body = json.dumps([event]).encode()
    response = post(credential_id, body, keys.headers(body))
    assert response.json() == {"received": 1, "bounced": 0, "unsubscribed": 0, "ignored": 1}

    # The address is on the account's suppression list: a contact created with it
    # later is born unsubscribed.
    api_client = client_for(api_key_create(account=account, label="t").plaintext)
    created = api_client.post("/contacts", {"email": "stranger@example.org"}, format="json")
    assert created.status_code == 201
    assert created.json()["unsubscribed_at"] is not None


def test_a_complaint_for_an_unknown_message_suppresses_nobody(keys, campaign_enrollments):
    credential_id = campaign_enrollments[0].credential_id
    event = sendgrid_event("spamreport", "<unknown@elsewhere>", email="someone@example.org")
    body = json.dumps([event, {**event, "email": "x" * 300}]).encode()
    assert post(credential_id, body, keys.headers(body)).json()["ignored"] == 2
    assert not Suppression.objects.exists()


def test_a_batch_larger_than_the_api_json_limit_is_accepted(keys, campaign_enrollments, settings):
    settings.MAX_RELAY_BODY_BYTES = 3 * 1024 * 1024
    enrollment = campaign_enrollments[0]
    bounce = sendgrid_event(
        "bounce", first_message(enrollment).message_id, type="bounce", status="5.1.1"
    )
    filler = [sendgrid_event("delivered", f"m{n}@example.org") for n in range(6000)]
    body = json.dumps([bounce, *filler]).encode()
    assert settings.MAX_JSON_BODY_BYTES < len(body) < settings.MAX_RELAY_BODY_BYTES
    response = post(enrollment.credential_id, body, keys.headers(body))
    assert response.status_code == 200, response.content
    assert response.json()["bounced"] == 1


def test_a_batch_over_the_relay_limit_is_413(keys, campaign_enrollments, settings):
    settings.MAX_RELAY_BODY_BYTES = 1000
    enrollment = campaign_enrollments[0]
    body = json.dumps([sendgrid_event("delivered", f"m{n}@x") for n in range(20)]).encode()
    response = post(enrollment.credential_id, body, keys.headers(body))
    body = assert_error(response, 413, "payload_too_large")
    assert body["details"] == {"limit_bytes": 1000}
    assert_untouched(campaign_enrollments)
