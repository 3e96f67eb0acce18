"""POST /smtp_credentials/:id/inbound: a whole message taken into a simulator mailbox as
its poll would take it (docs/sandbox.md, "Replaying a message")."""

from pathlib import Path

import pytest
from django.utils import timezone

from accounts.services import api_key_create
from outreach.intake import simulated_mail as mail
from outreach.models.conversations import Reply
from outreach.models.sending import CredentialCampaignStats, Enrollment
from tests.conftest import client_for
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.intake.simulator import simulated_send, simulator_credential
from tests.intake.test_simulator_outcomes import seen, through_the_poll
from tests.outreach.factories import CredentialFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db

SAVED = Path(__file__).resolve().parents[1] / "conversations" / "mail" / "gmail_reply.eml"


@pytest.fixture
def sent():
    """A simulator's sent message (to a contact who asks for nothing) and a client of its
    account."""
    enrollment, message, _ = simulated_send("x", name="anna")
    key = api_key_create(account=enrollment.campaign.account, label="test")
    return enrollment, message, client_for(key.plaintext)


def post(client, credential_id, body, **headers):
    path = f"/smtp_credentials/{credential_id}/inbound"
    if isinstance(body, str):  # JSON as written
        return client.post(path, body, content_type="application/json", **headers)
    return client.post(path, body, format="json", **headers)


def saved_reply_to(message) -> str:
    """A real mail client's reply (a saved Gmail message), re-threaded to `message`."""
    raw = SAVED.read_text().replace(
        "<20260302085501.3f2a9c@outreach-demo.example>", f"<{message.message_id}>"
    )
    return raw.replace("\n", "\r\n")


def test_a_saved_reply_is_kept_and_does_what_a_polled_one_does(
    sent, django_capture_on_commit_callbacks
):
    enrollment, message, client = sent
    twin, twin_message, _ = simulated_send("x", name="anna")
    raw = saved_reply_to(message)

    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, message.credential_id, {"raw": raw})
    assert response.status_code == 202, response.content
    assert response.json() == {
        "credential_id": str(message.credential_id),
        "message_id": "CAF3xk2E9mJd8qWfN+0Lr5=pQx7kY4vB0sTQ@mail.gmail.com",
        "size": len(raw.encode()),
    }
    through_the_poll(twin_message, saved_reply_to(twin_message).encode())

    shown = seen(enrollment)
    assert shown == seen(twin)
    assert shown["status"] == "replied"
    assert shown["reply"][2].startswith("Hi Sam,")
    assert shown["events"] == ["enrollment.replied"]


def test_the_same_message_posted_twice_is_kept_once(sent, django_capture_on_commit_callbacks):
    enrollment, message, client = sent
    raw = saved_reply_to(message)
    without_id = "\r\n".join(
        line for line in raw.split("\r\n") if not line.startswith("Message-ID:")
    ).replace("Re: Quick", "Re: Another")
    with django_capture_on_commit_callbacks(execute=True):
        for body in (raw, raw, without_id, without_id):
            assert post(client, message.credential_id, {"raw": body}).status_code == 202
    assert Reply.objects.filter(enrollment=enrollment).count() == 2
    assert len(events("enrollment.replied")) == 1


def test_a_delivery_report_bounces_the_message_it_names(sent, django_capture_on_commit_callbacks):
    enrollment, message, client = sent
    raw = mail.delivery_report(message=message, now=timezone.now()).decode()
    with django_capture_on_commit_callbacks(execute=True):
        assert post(client, message.credential_id, {"raw": raw}).status_code == 202
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.BOUNCED


def test_unrelated_mail_is_accepted_and_changes_nothing(sent, django_capture_on_commit_callbacks):
    enrollment, message, client = sent
    raw = "From: someone@elsewhere.example\r\nSubject: Hi\r\n\r\nNot about anything.\r\n"
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, message.credential_id, {"raw": raw})
    assert response.status_code == 202
    assert response.json()["message_id"] is None
    assert Reply.objects.count() == 0 and events() == []


def test_a_real_mailbox_is_409(sent):
    enrollment, _, client = sent
    real = CredentialFactory(account=enrollment.campaign.account)
    body = assert_error(
        post(client, real.pk, {"raw": "Subject: x\r\n\r\ny"}), 409, "credential_not_simulated"
    )
    assert body["details"] == {"auth_method": "password"}


def test_another_accounts_mailbox_an_unknown_or_a_malformed_id_is_404(sent, other_account):
    _, _, client = sent
    theirs = simulator_credential(other_account)
    for credential_id in (theirs.pk, "8d6c1a40-1b8e-4a2b-9d2e-5a0b1c2d3e4f", "nope"):
        assert_error(post(client, credential_id, {"raw": "x"}), 404, "credential_not_found")


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"raw"}),
        ({"raw": ""}, {"raw"}),
        ({"raw": "  \r\n"}, {"raw"}),
        ({"raw": 42}, {"raw"}),
        ('{"raw": "Subject: x\\r\\n\\r\\n\\ud800"}', {"raw"}),  # a lone surrogate
        ({"raw": "Subject: x\r\n\r\ny", "mailbox": "INBOX"}, {"mailbox"}),
    ],
)
def test_a_bad_body_is_422_and_queues_nothing(
    sent, body, fields, django_capture_on_commit_callbacks
):
    _, message, client = sent
    with django_capture_on_commit_callbacks() as callbacks:
        assert_fields(post(client, message.credential_id, body), *fields)
    assert callbacks == []


def test_a_message_over_imap_max_message_bytes_is_413(sent, settings):
    _, message, client = sent
    settings.IMAP_MAX_MESSAGE_BYTES = 100
    body = assert_error(
        post(client, message.credential_id, {"raw": "Subject: x\r\n\r\n" + "y" * 100}),
        413,
        "payload_too_large",
    )
    assert body["details"] == {"limit_bytes": 100, "field": "raw"}


def test_a_body_over_the_endpoints_limit_is_413_before_it_is_read(sent, settings):
    _, message, client = sent
    settings.IMAP_MAX_MESSAGE_BYTES = 10_000
    settings.MAX_JSON_BODY_BYTES = 1_000
    # Up to twice a message's size (its escapes in JSON): taken, and judged by its bytes.
    assert (
        post(client, message.credential_id, {"raw": "Subject: x\r\n\r\n" + "y" * 9000}).status_code
        == 202
    )
    body = assert_error(
        post(client, message.credential_id, {"raw": "y" * 30_000}), 413, "payload_too_large"
    )
    assert body["details"] == {"limit_bytes": 24_096}


def test_it_needs_a_key_and_takes_an_idempotency_key(sent, anon_client):
    _, message, client = sent
    assert_error(
        post(anon_client, message.credential_id, {"raw": "x"}), 401, "authentication_required"
    )
    first = post(
        client, message.credential_id, {"raw": "Subject: x\r\n\r\ny"}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    again = post(
        client, message.credential_id, {"raw": "Subject: x\r\n\r\ny"}, HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert first.status_code == again.status_code == 202
    assert first.json() == again.json()


def test_mail_posted_to_a_simulator_never_touches_what_a_real_mailbox_sent(
    sent, django_capture_on_commit_callbacks
):
    enrollment, message, client = sent
    real = sent_enrollment(account=enrollment.campaign.account)
    real_message = real.messages.get()
    threaded = saved_reply_to(real_message)
    report = mail.delivery_report(message=real_message, now=timezone.now()).decode()

    with django_capture_on_commit_callbacks(execute=True):
        for raw in (threaded, report):
            assert post(client, message.credential_id, {"raw": raw}).status_code == 202

    real.refresh_from_db()
    assert (real.status, real.replied_at, real.bounce_reason) == ("sent", None, None)
    assert Reply.objects.count() == 0 and events() == []
    assert CredentialCampaignStats.objects.filter(bounces__gt=0).count() == 0


def test_hostile_mail_is_kept_with_its_defects_and_the_next_message_still_goes_through(
    sent, django_capture_on_commit_callbacks
):
    """Broken MIME posted as a reply (an unterminated multipart, an unknown charset, 8-bit
    bytes, a header line of 20,000 characters): 202, the reply kept with what was wrong in
    it; a NUL is refused with its reason; a well-formed reply is then taken as usual."""
    enrollment, message, client = sent
    hostile = (
        "From: Anna <anna@example.org>\r\n"
        f"In-Reply-To: <{message.message_id}>\r\n"
        "Message-ID: <hostile@example.org>\r\n"
        f"X-Long: {'A' * 20000}\r\n"
        "Subject: Re: =?x-unknown?B?////?=\r\n"
        'Content-Type: multipart/alternative; boundary="never"\r\n'
        "\r\n"
        "--never\r\n"
        "Content-Type: text/plain; charset=x-no-such-charset\r\n"
        "Content-Transfer-Encoding: base64\r\n"
        "\r\n"
        "SGVsbG8gdGhlcmU\x00\xff\xfe!!\r\n"
    )
    # A NUL cannot be stored in a text column: refused with the reason, nothing queued.
    assert_error(post(client, message.credential_id, {"raw": hostile}), 422, "validation_failed")
    assert Reply.objects.count() == 0
    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, message.credential_id, {"raw": hostile.replace("\x00", "")})
    assert response.status_code == 202, response.content
    kept = Reply.objects.get(enrollment=enrollment, message_id="hostile@example.org")
    assert kept.defects  # kept and reported, not a crashed intake

    with django_capture_on_commit_callbacks(execute=True):
        response = post(client, message.credential_id, {"raw": saved_reply_to(message)})
    assert response.status_code == 202
    assert Reply.objects.filter(enrollment=enrollment).count() == 2
