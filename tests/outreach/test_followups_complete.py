"""on_complete: an enrollment that ends `completed` without a reply enrols its contact in
the rule's campaign, after the last step's send through the real send path (an SMTP
server, tests/support/smtp.py), once, and nothing is lost when the task after the
completion's commit never runs (the beat sweep)."""

from datetime import timedelta

import pytest

import outreach.campaigns.tasks  # noqa: F401  (registers the tasks, as a worker does)
from outreach.campaigns import followups
from outreach.campaigns.followups import followups_sweep
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment
from outreach.models.sequences import RuleFire
from outreach.sending.scheduler import schedule_due
from tests.outreach.factories import CampaignFactory, EnrollmentFactory
from tests.outreach.test_sending import NOW, _campaign, _enroll, _run
from tests.support.threads import at_once

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _with_rule(campaign, target, *, condition="any", delay=0, since=NOW - timedelta(days=1)):
    campaign.on_complete = {
        "campaign_id": str(target.pk),
        "delay_minutes": delay,
        "if": condition,
        "since": since.isoformat(),
    }
    campaign.save(update_fields=["on_complete"])


@pytest.fixture
def pair(sink):
    source = _campaign(sink)
    target = CampaignFactory(account=source.account, name="Nurture", status="active")
    _with_rule(source, target)
    return source, target


def _followed(target, enrollment) -> Enrollment | None:
    return Enrollment.objects.filter(campaign=target, contact_id=enrollment.contact_id).first()


def test_the_last_steps_send_enrols_the_contact_in_the_target(
    pair, sink, django_capture_on_commit_callbacks
):
    source, target = pair
    enrollment = _enroll(source)
    with django_capture_on_commit_callbacks(execute=True):
        [result] = _run()
    assert result.sent == 1 and len(sink.messages) == 1
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    followed = _followed(target, enrollment)
    assert followed is not None and followed.status == "scheduled"
    fire = RuleFire.objects.get(enrollment=enrollment)
    assert (fire.rule, fire.campaign_id, fire.outcome) == ("complete", target.pk, "enrolled")


def test_a_step_that_is_not_the_last_enrols_no_one(sink, django_capture_on_commit_callbacks):
    source = _campaign(sink, steps=2)
    target = CampaignFactory(account=source.account, status="active")
    _with_rule(source, target)
    enrollment = _enroll(source)
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    enrollment.refresh_from_db()
    assert enrollment.status == "sent"
    assert _followed(target, enrollment) is None


def test_a_lost_task_is_fired_by_the_sweep_once(
    pair, monkeypatch, django_capture_on_commit_callbacks
):
    source, target = pair
    enrollment = _enroll(source)
    # The worker dies right after the completion commits: its task never runs.
    monkeypatch.setattr(followups, "_complete_task_enqueue", lambda ids: None)
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    enrollment.refresh_from_db()
    assert enrollment.status == "completed" and _followed(target, enrollment) is None
    # Within its grace the sweep leaves it to the task; after it, fires it, once.
    assert followups_sweep(now=enrollment.completed_at) == 0
    later = enrollment.completed_at + followups.SWEEP_GRACE
    assert followups_sweep(now=later) == 1
    assert followups_sweep(now=later + timedelta(minutes=5)) == 0
    assert _followed(target, enrollment).status == "scheduled"
    assert RuleFire.objects.filter(enrollment=enrollment).count() == 1


def test_the_task_and_the_sweep_both_running_enrol_once(pair, django_capture_on_commit_callbacks):
    source, target = pair
    enrollment = _enroll(source)
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    enrollment.refresh_from_db()
    assert followups_sweep(now=enrollment.completed_at + timedelta(minutes=2)) == 0
    assert outreach.campaigns.tasks.followups_complete([str(enrollment.pk)]) == 0
    assert Enrollment.objects.filter(campaign=target).count() == 1


@pytest.mark.parametrize(
    ("condition", "opened", "fires"),
    [
        ("any", False, True),
        ("opened", True, True),
        ("opened", False, False),
        ("not_opened", False, True),
        ("not_opened", True, False),
        ("clicked", False, False),
    ],
)
def test_the_condition_is_read_on_the_ended_enrollment(
    pair, condition, opened, fires, django_capture_on_commit_callbacks
):
    source, target = pair
    _with_rule(source, target, condition=condition)
    enrollment = _enroll(source)
    if opened:
        Enrollment.objects.filter(pk=enrollment.pk).update(opened_at=NOW - timedelta(minutes=1))
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    assert (_followed(target, enrollment) is not None) is fires
    # The sweep agrees with the task.
    assert followups_sweep(now=enrollment.completed_at + timedelta(minutes=2)) == 0


def test_a_replied_enrollment_enrols_no_one(pair):
    source, target = pair
    enrollment = _enroll(source)
    _run()  # its task is lost: the sweep decides
    Enrollment.objects.filter(pk=enrollment.pk).update(
        status="replied", replied_at=NOW + timedelta(seconds=1)
    )
    assert followups_sweep(now=NOW + timedelta(minutes=5)) == 0
    assert _followed(target, enrollment) is None


def test_enrollments_completed_before_the_rule_was_set_are_left(pair):
    source, target = pair
    enrollment = _enroll(source)
    _run()
    _with_rule(source, target, since=NOW + timedelta(seconds=1))
    assert followups_sweep(now=NOW + timedelta(minutes=5)) == 0
    assert _followed(target, enrollment) is None


def test_the_scheduler_completing_an_enrollment_without_steps_left_fires_it(
    pair, django_capture_on_commit_callbacks
):
    source, target = pair
    enrollment = _enroll(source)
    Enrollment.objects.filter(pk=enrollment.pk).update(current_step=1, status="sent")
    with django_capture_on_commit_callbacks(execute=True):
        schedule_due(now=NOW)
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    assert _followed(target, enrollment).status == "scheduled"


def test_the_rule_delay_comes_before_step_one(pair, django_capture_on_commit_callbacks):
    source, target = pair
    _with_rule(source, target, delay=60 * 24)
    CampaignStep.objects.filter(campaign=target).update(delay_minutes=30)
    enrollment = _enroll(source)
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    followed = _followed(target, enrollment)
    assert followed.next_send_at >= NOW + timedelta(days=1, minutes=30)


def test_a_draft_target_keeps_the_contact_pending(pair, django_capture_on_commit_callbacks):
    source, _target = pair
    draft = CampaignFactory(account=source.account, status=Campaign.Status.DRAFT)
    _with_rule(source, draft)
    enrollment = _enroll(source)
    with django_capture_on_commit_callbacks(execute=True):
        _run()
    assert _followed(draft, enrollment).status == "pending"
    assert RuleFire.objects.get(enrollment=enrollment).outcome == "pending_draft"
    assert Campaign.objects.get(pk=draft.pk).status == "draft"


def test_the_record_of_the_last_send_fires_the_rule(pair, django_capture_on_commit_callbacks):
    source, target = pair
    first, second = _enroll(source), _enroll(source)
    for enrollment in (first, second):
        with django_capture_on_commit_callbacks(execute=True):
            _run(NOW + timedelta(minutes=1) if enrollment is second else NOW)
    for enrollment in (first, second):
        enrollment.refresh_from_db()
        assert enrollment.status == "completed"
        assert _followed(target, enrollment).status == "scheduled"


@pytest.mark.usefixtures("live_db")
@pytest.mark.django_db(transaction=True)
def test_the_task_and_sweeps_at_once_enrol_once():
    source = CampaignFactory(status="active")
    target = CampaignFactory(account=source.account, status="active")
    _with_rule(source, target)
    enrollment = EnrollmentFactory(
        campaign=source, status="completed", current_step=1, completed_at=NOW
    )
    later = NOW + timedelta(minutes=5)
    calls = [
        lambda: followups.complete_rule_fire(enrollment_id=enrollment.pk, now=later),
        lambda: followups_sweep(now=later),
    ]
    at_once(calls * 3)
    assert Enrollment.objects.filter(campaign=target).count() == 1
    assert RuleFire.objects.filter(enrollment=enrollment).count() == 1


def test_a_rule_whose_target_is_gone_is_no_work_for_the_sweep(pair):
    source, target = pair
    _enroll(source)
    _run()  # its task is lost
    Campaign.objects.filter(pk=target.pk).delete()  # not through the API: the rule stays
    assert followups.completions_unfired(now=NOW + timedelta(minutes=5)) == []
    assert followups_sweep(now=NOW + timedelta(minutes=5)) == 0


def test_the_admin_deleting_a_target_drops_the_rule(pair, admin_client):
    source, target = pair
    response = admin_client.post(
        f"/admin/outreach/campaign/{target.pk}/delete/", {"post": "yes"}, follow=False
    )
    assert response.status_code == 302
    source.refresh_from_db()
    assert source.on_complete is None


def test_a_late_fire_counts_the_delay_from_the_completion(pair):
    source, target = pair
    _with_rule(source, target, delay=60)
    enrollment = _enroll(source)
    _run()  # its task is lost
    enrollment.refresh_from_db()
    assert followups_sweep(now=enrollment.completed_at + timedelta(minutes=5)) == 1
    followed = _followed(target, enrollment)
    assert followed.next_send_at == enrollment.completed_at + timedelta(minutes=60)


def test_a_fire_later_than_its_delay_dispatches_at_once(pair):
    source, target = pair
    _with_rule(source, target, delay=60)
    enrollment = _enroll(source)
    _run()  # its task is lost
    enrollment.refresh_from_db()
    late = enrollment.completed_at + timedelta(hours=3)
    assert followups_sweep(now=late) == 1
    assert _followed(target, enrollment).next_send_at == late
