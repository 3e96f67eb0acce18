"""Which due jobs a claim takes (webhooks.jobs): every due one of a healthy or a disabled
webhook, and for a failing one its retries first and new deliveries only while the
failures and the deliveries under way stay below FAILURES_BEFORE_DISABLE."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit
from webhooks.jobs import jobs_claim, jobs_claimable
from webhooks.models import DeliveryJob, Webhook

pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]


@pytest.fixture
def webhook(account):
    return WebhookFactory(account=account)


def emit(account, count: int) -> list:
    """`count` new deliveries, due now, oldest first (their ids)."""
    for n in range(count):
        event_emit(account=account, event_type="enrollment.sent", data={"n": n})
    return list(DeliveryJob.objects.order_by("created_at").values_list("id", flat=True))


def retrying(job_ids, *, due: bool = True) -> None:
    """As if their first attempt failed and a retry was scheduled (due now, or later)."""
    when = timezone.now() + (timedelta(seconds=-1) if due else timedelta(hours=1))
    DeliveryJob.objects.filter(id__in=job_ids).update(attempts=1, next_attempt_at=when)


def claimed_ids(claim) -> set:
    return {item.job.id for item in claim.jobs}


def test_a_healthy_webhook_s_due_jobs_are_claimed_oldest_first(account, webhook):
    jobs = emit(account, 6)
    claim = jobs_claim(webhook_id=webhook.id, limit=4, attempt_failed=False)
    assert [item.job.id for item in claim.jobs] == jobs[:4]
    assert [(item.attempt, item.lost_attempt) for item in claim.jobs] == [(1, None)] * 4
    assert claim.webhook.id == webhook.id and claim.attempt_failed is False
    job = DeliveryJob.objects.get(id=jobs[0])
    assert (job.state, job.attempts, job.claim_token) == (
        "delivering",
        1,
        claim.jobs[0].job.claim_token,
    )
    assert claim.jobs[0].job.event.data == {"n": 0}


def test_jobs_in_flight_are_not_claimed_again(account, webhook):
    jobs = emit(account, 3)
    claim = jobs_claim(webhook_id=webhook.id, limit=3, in_flight=[jobs[0]])
    assert claimed_ids(claim) == set(jobs[1:])


def test_a_failing_webhook_claims_its_retries_first_and_new_deliveries_within_the_budget(
    account, webhook
):
    jobs = emit(account, 10)
    retrying(jobs[8:])
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=1)
    claim = jobs_claim(webhook_id=webhook.id, limit=10)
    # The two retries, then 5 - 1 failure - 2 under way = 2 new deliveries (the oldest).
    assert claimed_ids(claim) == {*jobs[8:], *jobs[:2]}
    assert claim.attempt_failed is None  # failing: the next claim looks again


def test_a_failing_webhook_with_its_budget_spent_claims_only_its_retries(account, webhook):
    jobs = emit(account, 10)
    retrying(jobs[:2])
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=3)
    assert claimed_ids(jobs_claim(webhook_id=webhook.id, limit=10)) == set(jobs[:2])


def test_a_failed_attempt_waiting_for_its_retry_makes_the_webhook_failing(account, webhook):
    jobs = emit(account, 8)
    retrying(jobs[:1], due=False)
    # Not told (attempt_failed None): the claim looks, and 5 - 0 - 1 under way = 4.
    claim = jobs_claim(webhook_id=webhook.id, limit=8)
    assert claimed_ids(claim) == set(jobs[1:5])
    assert claim.attempt_failed is None  # failing: the next claim looks again
    # Told no attempt failed (a drain that knows it): every due job.
    DeliveryJob.objects.filter(id__in=jobs[1:5]).update(state="succeeded")
    claim = jobs_claim(webhook_id=webhook.id, limit=8, attempt_failed=False)
    assert claimed_ids(claim) == set(jobs[5:])


def test_a_disabled_webhook_s_due_jobs_are_all_claimed_to_be_dropped(account, webhook):
    jobs = emit(account, 7)
    retrying(jobs[:1])
    Webhook.objects.filter(id=webhook.id).update(disabled_at=timezone.now(), consecutive_failures=5)
    claim = jobs_claim(webhook_id=webhook.id, limit=10)
    assert claimed_ids(claim) == set(jobs)
    assert claim.webhook.disabled_at is not None


def test_a_deleted_webhook_claims_nothing(account, webhook):
    emit(account, 2)
    webhook_id = webhook.id
    webhook.delete()
    claim = jobs_claim(webhook_id=webhook_id, limit=4)
    assert claim.webhook is None and claim.jobs == []


def test_claimable_says_whether_a_claim_would_take_a_job(account, webhook):
    assert jobs_claimable(webhook.id) is False
    jobs = emit(account, 6)
    assert jobs_claimable(webhook.id) is True
    # Failing with its budget spent and no retry due: nothing a claim would take.
    retrying(jobs[:1], due=False)
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=4)
    assert jobs_claimable(webhook.id) is False
    assert DeliveryJob.objects.filter(state="delivering").count() == 0  # it claimed nothing


def test_a_lost_attempt_claimed_again_makes_the_next_claim_look(account, webhook):
    jobs = emit(account, 1)
    first = jobs_claim(webhook_id=webhook.id, limit=1, attempt_failed=False)
    assert first.attempt_failed is False
    # Its worker was lost: the claim's lease lapsed with the attempt's outcome unknown.
    DeliveryJob.objects.filter(id=jobs[0]).update(next_attempt_at=timezone.now())
    claim = jobs_claim(webhook_id=webhook.id, limit=1, attempt_failed=False)
    assert [(item.job.id, item.lost_attempt, item.attempt) for item in claim.jobs] == [
        (jobs[0], 1, 2)
    ]
    assert claim.attempt_failed is None  # a lost attempt is a failed one
