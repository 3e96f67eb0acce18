"""on_reply rules through PATCH /replies/:id: a label with a rule enrols the contact in
the rule's campaign and dispatches it, once per enrollment and rule, and the reply shows
what the rule did (docs/outreach.md, "Follow-up campaigns")."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.services import api_key_create
from billing.usage import usage_record_current
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment
from outreach.models.sequences import RuleFire
from tests.conftest import client_for
from tests.conversations.reply_rows import reply_for
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CampaignFactory, EnrollmentFactory
from tests.support.threads import at_once
from tests.support.usage import usage_set
from webhooks.models import Event, Webhook
from webhooks.secrets import secret_generate

pytestmark = pytest.mark.django_db


def _setup(account, *, target_status="active", delay=0, **target):
    target = CampaignFactory(account=account, name="Meeting", status=target_status, **target)
    enrollment = sent_enrollment(account=account)
    source = enrollment.campaign
    source.on_reply = [
        {"label": "interested", "campaign_id": str(target.pk), "delay_minutes": delay}
    ]
    source.save(update_fields=["on_reply"])
    return enrollment, target, reply_for(enrollment)


def label(client, reply, value):
    response = client.patch(f"/replies/{reply.pk}", {"label": value}, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_a_label_with_a_rule_enrols_and_dispatches_the_contact(api_client, account):
    enrollment, target, reply = _setup(account)
    before = timezone.now()
    body = label(api_client, reply, "interested")
    assert body["rule_outcomes"] == [
        {"label": "interested", "campaign_id": str(target.pk), "outcome": "enrolled"}
    ]
    assert api_client.get(f"/replies/{reply.pk}").json()["rule_outcomes"] == body["rule_outcomes"]
    followed = Enrollment.objects.get(campaign=target, contact=enrollment.contact)
    assert followed.status == "scheduled"
    assert before <= followed.next_send_at <= timezone.now()
    listed = api_client.get(f"/campaigns/{target.pk}/enrollments").json()
    assert [(e["contact_id"], e["status"]) for e in listed] == [
        (str(enrollment.contact_id), "scheduled")
    ]


def test_the_rule_delay_comes_before_step_one(api_client, account):
    enrollment, target, reply = _setup(account, delay=90)
    before = timezone.now()
    label(api_client, reply, "interested")
    followed = Enrollment.objects.get(campaign=target, contact=enrollment.contact)
    assert followed.next_send_at >= before + timedelta(minutes=90)
    assert followed.next_send_at <= timezone.now() + timedelta(minutes=90)


def test_a_label_set_twice_or_unset_and_set_again_enrols_once(api_client, account):
    enrollment, target, reply = _setup(account)
    label(api_client, reply, "interested")
    label(api_client, reply, "interested")
    label(api_client, reply, None)
    body = label(api_client, reply, "interested")
    assert body["rule_outcomes"] == [
        {"label": "interested", "campaign_id": str(target.pk), "outcome": "enrolled"}
    ]
    assert Enrollment.objects.filter(campaign=target).count() == 1
    assert RuleFire.objects.filter(enrollment=enrollment).count() == 1
    # A second reply of the same enrollment with the same label: the rule has acted.
    second = reply_for(enrollment)
    assert label(api_client, second, "interested")["rule_outcomes"] == body["rule_outcomes"]
    assert Enrollment.objects.filter(campaign=target).count() == 1


def test_a_label_without_a_rule_enrols_no_one(api_client, account):
    _enrollment, target, reply = _setup(account)
    assert label(api_client, reply, "meeting_booked")["rule_outcomes"] == []
    assert not Enrollment.objects.filter(campaign=target).exists()


def test_a_contact_already_in_the_target_stays_as_it_is(api_client, account):
    enrollment, target, reply = _setup(account)
    there = EnrollmentFactory(campaign=target, contact=enrollment.contact, status="completed")
    assert label(api_client, reply, "interested")["rule_outcomes"][0]["outcome"] == (
        "already_enrolled"
    )
    there.refresh_from_db()
    assert there.status == "completed" and there.next_send_at is None


def test_over_the_soft_cap_the_enrollment_stays_pending(api_client, account):
    enrollment, target, reply = _setup(account)
    usage_set(usage_record_current(account=account), account.plan.monthly_limit)
    assert label(api_client, reply, "interested")["rule_outcomes"][0]["outcome"] == (
        "pending_over_cap"
    )
    followed = Enrollment.objects.get(campaign=target, contact=enrollment.contact)
    assert (followed.status, followed.next_send_at) == ("pending", None)


@pytest.mark.parametrize(
    ("status", "outcome", "enrollment_status", "campaign_status"),
    [
        ("draft", "pending_draft", "pending", "draft"),
        ("paused", "enrolled", "scheduled", "paused"),
        ("completed", "enrolled", "scheduled", "active"),
    ],
)
def test_what_a_draft_paused_or_completed_target_does(
    api_client, account, status, outcome, enrollment_status, campaign_status
):
    enrollment, target, reply = _setup(account, target_status=status)
    assert label(api_client, reply, "interested")["rule_outcomes"][0]["outcome"] == outcome
    assert Enrollment.objects.get(campaign=target).status == enrollment_status
    assert Campaign.objects.get(pk=target.pk).status == campaign_status


def test_a_target_that_cannot_send_keeps_the_contact_pending(api_client, account):
    _enrollment, target, reply = _setup(account, with_credential=False)
    assert label(api_client, reply, "interested")["rule_outcomes"][0]["outcome"] == (
        "pending_not_sendable"
    )
    assert Enrollment.objects.get(campaign=target).status == "pending"


def test_a_suppressed_contact_is_not_enrolled(api_client, account):
    enrollment, target, reply = _setup(account)
    enrollment.contact.unsubscribed_at = timezone.now()
    enrollment.contact.save()
    assert label(api_client, reply, "interested")["rule_outcomes"][0]["outcome"] == "suppressed"
    assert not Enrollment.objects.filter(campaign=target).exists()


def test_a_manual_label_acts_only_through_the_rules(api_client, account):
    enrollment, _target, reply = _setup(account)
    label(api_client, reply, "unsubscribe_request")
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is None
    assert reply.__class__.objects.get(pk=reply.pk).rule_outcomes == []


def test_reply_labelled_goes_to_webhooks_that_name_it(api_client, account):
    _enrollment, _target, reply = _setup(account)
    for filters in (["*"], ["reply.labelled"]):
        Webhook.objects.create(
            account=account,
            url="https://r.example/h",
            event_filters=filters,
            secret=secret_generate(),
        )
    label(api_client, reply, "interested")
    [event] = Event.objects.filter(type="reply.labelled")
    assert event.data == {
        "reply_id": str(reply.pk),
        "enrollment_id": str(reply.enrollment_id),
        "label": "interested",
        "label_source": "manual",
    }
    assert [job.webhook.event_filters for job in event.jobs.all()] == [["reply.labelled"]]


def test_an_account_that_asked_for_no_reply_events_records_none(api_client, account):
    _enrollment, _target, reply = _setup(account)
    Webhook.objects.create(
        account=account, url="https://r.example/h", event_filters=["*"], secret=secret_generate()
    )
    label(api_client, reply, "interested")
    assert not Event.objects.filter(type__startswith="reply.").exists()


def test_another_accounts_reply_is_not_found(other_client, account):
    _enrollment, target, reply = _setup(account)
    response = other_client.patch(f"/replies/{reply.pk}", {"label": "interested"}, format="json")
    assert response.status_code == 404
    assert not Enrollment.objects.filter(campaign=target).exists()


@pytest.mark.usefixtures("live_db")
@pytest.mark.django_db(transaction=True)
def test_concurrent_patches_enrol_once(account):
    enrollment, target, reply = _setup(account)
    client = client_for(api_key_create(account=account, label="race").plaintext)

    def patch():
        response = client.patch(f"/replies/{reply.pk}", {"label": "interested"}, format="json")
        assert response.status_code == 200, response.content

    at_once([patch] * 6)
    assert Enrollment.objects.filter(campaign=target).count() == 1
    assert RuleFire.objects.filter(enrollment=enrollment).count() == 1
    reply.refresh_from_db()
    assert reply.rule_outcomes == [
        {"label": "interested", "campaign_id": str(target.pk), "outcome": "enrolled"}
    ]
