"""POST /inbound/relay/<credential_id> for a Mailgun credential."""

import json
import time
import uuid

import pytest
from django.test import Client

from outreach.models.contacts import Suppression
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.relay_signing import (
    MAILGUN_KEY,
    mailgun_body,
    mailgun_complained,
    mailgun_failed,
)
from tests.outreach.factories import CredentialFactory
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


@pytest.fixture
def enrollment():
    enrollment = sent_enrollment()
    SmtpCredential.objects.filter(pk=enrollment.credential_id).update(relay_provider="mailgun")
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.relay_signing_key = MAILGUN_KEY
    credential.save()
    return enrollment


def post(credential_id, body: bytes):
    return Client().post(
        f"/inbound/relay/{credential_id}", data=body, content_type="application/json"
    )


def assert_nothing_recorded(enrollment):
    enrollment.refresh_from_db()
    enrollment.contact.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    assert enrollment.contact.bounced_at is None
    assert enrollment.contact.unsubscribed_at is None
    assert events() == []


def test_it_turns_a_permanent_failure_into_a_bounce(enrollment):
    message = first_message(enrollment)
    response = post(
        enrollment.credential_id, mailgun_body(mailgun_failed(f"<{message.message_id}>"))
    )
    assert response.status_code == 200
    assert response.json() == {"received": 1, "bounced": 1, "unsubscribed": 0, "ignored": 0}

    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.BOUNCED
    assert enrollment.next_send_at is None
    assert enrollment.bounce_reason == (
        "550 5.1.1 The email account that you tried to reach does not exist."
    )
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.bounced_at is not None
    enrollment.credential.refresh_from_db()
    assert enrollment.credential.bounced_count == 1
    [event] = events("enrollment.bounced")
    assert event.data["status"] == "bounced"
    assert event.data["bounce_reason"] == enrollment.bounce_reason
    assert event.data["enrollment_id"] == str(enrollment.pk)


def test_it_matches_the_message_id_with_spaces_and_another_case(enrollment):
    message = first_message(enrollment)
    local, domain = message.message_id.split("@")
    shouted = f"  <{local}@{domain.upper()}> "
    response = post(enrollment.credential_id, mailgun_body(mailgun_failed(shouted)))
    assert response.json()["bounced"] == 1


def test_a_temporary_failure_is_ignored(enrollment):
    message = first_message(enrollment)
    body = mailgun_body(mailgun_failed(message.message_id, severity="temporary"))
    response = post(enrollment.credential_id, body)
    assert response.status_code == 200
    assert response.json()["received"] == 0
    assert_nothing_recorded(enrollment)


def test_a_complaint_unsubscribes_the_contact(enrollment):
    message = first_message(enrollment)
    response = post(enrollment.credential_id, mailgun_body(mailgun_complained(message.message_id)))
    assert response.status_code == 200
    assert response.json()["unsubscribed"] == 1
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.UNSUBSCRIBED
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is not None
    # Recorded on the suppression list as a complaint (it outlives the contact).
    assert list(Suppression.objects.values_list("email_lower", "reason")) == [
        (enrollment.contact.email_lower, "complained")
    ]
    [event] = events("enrollment.unsubscribed")
    assert event.data["enrollment_id"] == str(enrollment.pk)
    assert events("enrollment.bounced") == []


def test_an_unknown_message_is_accepted_and_ignored(enrollment):
    response = post(
        enrollment.credential_id, mailgun_body(mailgun_failed("<nope@elsewhere.example>"))
    )
    assert response.status_code == 200
    assert response.json() == {"received": 1, "bounced": 0, "unsubscribed": 0, "ignored": 1}
    assert_nothing_recorded(enrollment)


def test_another_accounts_message_is_not_touched(enrollment):
    other = sent_enrollment()  # another account
    body = mailgun_body(mailgun_failed(first_message(other).message_id))
    assert post(enrollment.credential_id, body).json()["ignored"] == 1
    other.refresh_from_db()
    assert other.status == Enrollment.Status.SENT


@pytest.mark.parametrize("field", ["signature", "timestamp", "token"])
def test_a_tampered_signature_is_401_and_records_nothing(enrollment, field):
    # Mailgun signs timestamp + token (not event-data): changing any of the three
    # breaks it; a captured signature cannot be reused (see the replay test).
    body = json.loads(mailgun_body(mailgun_failed(first_message(enrollment).message_id)))
    value = body["signature"][field]
    body["signature"][field] = value[:-1] + ("0" if value[-1] != "0" else "1")
    response = post(enrollment.credential_id, json.dumps(body).encode())
    assert_error(response, 401, "invalid_relay_signature")
    assert_nothing_recorded(enrollment)


def test_a_body_signed_with_another_key_is_401(enrollment):
    body = mailgun_body(mailgun_failed(first_message(enrollment).message_id), key="wrong-key")
    assert_error(post(enrollment.credential_id, body), 401, "invalid_relay_signature")
    assert_nothing_recorded(enrollment)


@pytest.mark.parametrize("age", [301, 3600, -400])
def test_a_stale_or_future_timestamp_is_401(enrollment, age):
    body = mailgun_body(
        mailgun_failed(first_message(enrollment).message_id), timestamp=int(time.time()) - age
    )
    assert_error(post(enrollment.credential_id, body), 401, "invalid_relay_signature")
    assert_nothing_recorded(enrollment)


def test_a_replayed_token_is_401(enrollment):
    message = first_message(enrollment)
    complaint = mailgun_body(mailgun_complained("<unknown@elsewhere.example>"), token="t" * 50)
    assert post(enrollment.credential_id, complaint).status_code == 200
    # The same token again, even freshly signed around a different event: refused.
    replay = mailgun_body(mailgun_failed(message.message_id), token="t" * 50)
    assert_error(post(enrollment.credential_id, replay), 401, "invalid_relay_signature")
    assert_nothing_recorded(enrollment)


@pytest.mark.parametrize(
    "body",
    [b"", b"not json", b"[]", b'{"event-data": {}}', b'{"signature": "x", "event-data": {}}'],
)
def test_a_missing_signature_is_401(enrollment, body):
    assert_error(post(enrollment.credential_id, body), 401, "invalid_relay_signature")


def test_unknown_credentials_and_credentials_without_a_provider_are_401(enrollment):
    body = mailgun_body(mailgun_failed(first_message(enrollment).message_id))
    plain = CredentialFactory(account=enrollment.campaign.account)
    no_key = CredentialFactory(account=enrollment.campaign.account, relay_provider="mailgun")
    for credential_id in (uuid.uuid4(), "not-a-uuid", plain.pk, no_key.pk):
        assert_error(post(credential_id, body), 401, "invalid_relay_signature")
    assert_nothing_recorded(enrollment)


def test_a_second_bounce_for_the_same_message_changes_nothing(enrollment):
    message = first_message(enrollment)
    post(enrollment.credential_id, mailgun_body(mailgun_failed(message.message_id)))
    response = post(enrollment.credential_id, mailgun_body(mailgun_failed(message.message_id)))
    assert response.json()["ignored"] == 1
    assert len(events("enrollment.bounced")) == 1
    enrollment.credential.refresh_from_db()
    assert enrollment.credential.bounced_count == 1
