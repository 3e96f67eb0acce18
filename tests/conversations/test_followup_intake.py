"""A reply the intake labels (a real Dovecot, messages delivered by APPEND) acts through
its campaign's on_reply rule, and the reply events carry it (docs/outreach.md,
"Follow-up campaigns"; docs/webhooks.md)."""

import pytest
from django.utils import timezone

from outreach.models.conversations import Reply
from outreach.models.sending import Enrollment
from outreach.models.sequences import RuleFire
from tests.conversations.test_intake_replies import answer
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.intake.test_mailbox import poll, with_imap
from tests.outreach.factories import CampaignFactory
from tests.support.event_schemas import event_problems
from webhooks.models import Webhook
from webhooks.secrets import secret_generate

pytestmark = [pytest.mark.django_db, requires_dovecot]


@pytest.fixture
def thread(imap_mailbox, account):
    enrollment = sent_enrollment(account=account)
    credential = with_imap(enrollment, imap_mailbox)
    nurture = CampaignFactory(account=account, name="Nurture", status="active")
    source = enrollment.campaign
    source.on_reply = [{"label": "not_now", "campaign_id": str(nurture.pk), "delay_minutes": 0}]
    source.save(update_fields=["on_reply"])
    Webhook.objects.create(
        account=account,
        url="https://receiver.example/hook",
        event_filters=["*", "reply.received", "reply.labelled"],
        secret=secret_generate(),
    )
    return enrollment, credential, imap_mailbox, nurture


def test_a_not_now_reply_enrols_the_contact_in_the_rules_campaign(api_client, thread):
    enrollment, credential, mailbox, nurture = thread
    mailbox.append(
        answer(enrollment, credential, body="Not right now, maybe next quarter.\n\nThanks, Ada")
    )
    before = timezone.now()
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    [kept] = Reply.objects.all()
    assert (kept.label, kept.label_source) == ("not_now", "auto")
    body = api_client.get(f"/replies/{kept.pk}").json()
    assert body["label"] == "not_now"
    assert body["rule_outcomes"] == [
        {"label": "not_now", "campaign_id": str(nurture.pk), "outcome": "enrolled"}
    ]
    followed = Enrollment.objects.get(campaign=nurture, contact=enrollment.contact)
    assert followed.status == "scheduled" and followed.next_send_at >= before
    enrollment.refresh_from_db()
    assert enrollment.status == "replied"  # a not_now reply is a reply

    [replied] = events("enrollment.replied")
    assert replied.data["reply_id"] == str(kept.pk)
    [received] = events("reply.received")
    assert received.data["id"] == str(kept.pk)
    assert received.data["enrollment_id"] == str(enrollment.pk)
    assert received.data["rule_outcomes"] == body["rule_outcomes"]
    assert not {"text", "new_text", "html"} & set(received.data)
    assert {k: v for k, v in body.items() if k not in ("text", "new_text", "html")} == (
        received.data
    )
    [labelled] = events("reply.labelled")
    assert labelled.data == {
        "reply_id": str(kept.pk),
        "enrollment_id": str(enrollment.pk),
        "label": "not_now",
        "label_source": "auto",
    }
    for event in (replied, received, labelled):
        assert event_problems(event.type, event.data) == []


def test_a_message_seen_twice_acts_once(thread):
    enrollment, credential, mailbox, nurture = thread
    mailbox.append(answer(enrollment, credential, body="Not right now."))
    poll(credential)
    credential.imap_last_uid = 0
    credential.save(update_fields=["imap_last_uid"])
    assert [o.kind for o in poll(credential).outcomes] == ["ignored"]
    assert Enrollment.objects.filter(campaign=nurture).count() == 1
    assert RuleFire.objects.count() == 1
    assert len(events("reply.received")) == 1


def test_an_unlabelled_reply_and_an_auto_reply_are_received_and_act_on_nothing(thread):
    enrollment, credential, mailbox, nurture = thread
    mailbox.append(answer(enrollment, credential, body="Sounds good, Tuesday?"))
    mailbox.append(
        answer(
            enrollment,
            credential,
            subject="Automatic reply: Re: Hello",
            headers={"Auto-Submitted": "auto-replied"},
            body="Thank you for your message.",
        )
    )
    poll(credential)
    assert [e.data["label"] for e in events("reply.received")] == [None, "auto_reply"]
    assert [e.data["label"] for e in events("reply.labelled")] == ["auto_reply"]
    assert not Enrollment.objects.filter(campaign=nurture).exists()
