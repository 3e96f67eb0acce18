"""Two workers draining one webhook at the same moment (PostgreSQL, real threads,
each with its own connection): every due job goes to exactly one of them."""

import pytest
from django.db import transaction

from tests.accounts.factories import AccountFactory
from tests.accounts.test_concurrency import run_together
from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit
from webhooks.jobs import jobs_claim
from webhooks.models import DeliveryJob

pytestmark = [
    pytest.mark.synthetic_events,  # made-up payloads (tests/support/event_schemas.py)
    pytest.mark.usefixtures("live_db"),
]

JOBS = 120


def claim(**kwargs):
    """The drain's claim of a healthy webhook, as its first one (the failing attempts
    looked for) or a later one (known to have none)."""
    return jobs_claim(**kwargs).jobs


@pytest.mark.parametrize("attempt_failed", [None, False], ids=["first", "later"])
@pytest.mark.parametrize("round_", range(10))
def test_two_drains_never_claim_the_same_job(round_, attempt_failed, monkeypatch):
    from webhooks.tasks import webhook_drain

    monkeypatch.setattr(webhook_drain, "apply_async", lambda *args, **kwargs: None)
    account = AccountFactory()
    webhook = WebhookFactory(account=account)
    with transaction.atomic():
        for n in range(JOBS):
            event_emit(account=account, event_type="enrollment.sent", data={"n": n})

    # Both see every job as due and race their conditional UPDATEs over the same rows.
    first, second = run_together(
        lambda: claim(webhook_id=webhook.id, limit=JOBS, attempt_failed=attempt_failed),
        lambda: claim(webhook_id=webhook.id, limit=JOBS, attempt_failed=attempt_failed),
    )
    first_ids = {claimed.job.id for claimed in first}
    second_ids = {claimed.job.id for claimed in second}
    assert not first_ids & second_ids
    assert len(first_ids | second_ids) == JOBS
    jobs = list(DeliveryJob.objects.filter(webhook=webhook))
    assert {job.state for job in jobs} == {DeliveryJob.State.DELIVERING}
    assert {job.attempts for job in jobs} == {1}  # one attempt each, not two
    assert all(claimed.attempt == 1 and claimed.lost_attempt is None for claimed in first + second)
    tokens = {claimed.job.claim_token for claimed in first}, {c.job.claim_token for c in second}
    assert all(len(t) <= 1 for t in tokens) and not tokens[0] & tokens[1]
