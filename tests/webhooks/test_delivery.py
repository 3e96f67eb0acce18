"""Emission and delivery against a real local HTTP receiver (eager Celery: the
task runs in this process when the emitting transaction commits)."""

import json
from datetime import timedelta

import pytest
import stripe
from django.utils import timezone

from tests.support.receiver import Reply
from tests.webhooks.factories import WebhookFactory
from webhooks.answers import LOST_ATTEMPT_ERROR
from webhooks.delivery import webhook_drain
from webhooks.events import event_emit, jobs_sweep
from webhooks.models import DeliveryJob, Event, Webhook, WebhookDelivery
from webhooks.posting import http_post_signed, retry_delay

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]

DATA = {"enrollment_id": "e1", "contact_email": "ann@example.com", "status": "sent"}


@pytest.fixture
def emit(django_capture_on_commit_callbacks):
    """Emit in a transaction and run what happens after its commit (the fast path)."""

    def run(account, event_type="enrollment.sent", data=DATA, *, after_commit=True):
        with django_capture_on_commit_callbacks(execute=after_commit):
            return event_emit(account=account, event_type=event_type, data=data)

    return run


@pytest.fixture
def webhook(account, receiver):
    return WebhookFactory(account=account, url=receiver.url)


def rows(webhook):
    return list(WebhookDelivery.objects.filter(webhook=webhook).order_by("created_at", "attempt"))


def test_it_delivers_a_signed_envelope(emit, account, webhook, receiver):
    event = emit(account, data={**DATA, "sent_at": timezone.now()})

    (request,) = receiver.wait_for(1)
    job = DeliveryJob.objects.get(event=event)
    assert request.method == "POST"
    assert request.path == "/hook"
    assert request.headers["Content-Type"] == "application/json"
    assert request.headers["User-Agent"] == "service-webhooks/1.0"
    envelope = json.loads(request.body)
    assert set(envelope) == {"id", "type", "created_at", "account_id", "data"}
    assert envelope["id"] == str(job.id)
    assert envelope["type"] == "enrollment.sent"
    assert envelope["account_id"] == str(account.id)
    assert envelope["created_at"].endswith("Z")
    assert envelope["data"]["contact_email"] == "ann@example.com"
    assert envelope["data"]["sent_at"].endswith("Z")

    header = request.headers["X-Service-Signature"]
    assert header.startswith("t=") and ",v1=" in header
    assert stripe.WebhookSignature.verify_header(
        request.body.decode(), header, webhook.secret, tolerance=300
    )
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            request.body.decode(), header, "whsec_wrong", tolerance=300
        )

    (row,) = rows(webhook)
    assert (row.attempt, row.status_code, row.error, row.event_type) == (
        1,
        200,
        None,
        "enrollment.sent",
    )
    assert row.delivered_at is not None
    job.refresh_from_db()
    assert job.state == "succeeded" and job.attempts == 1


def test_the_old_secret_stops_verifying_after_rotation(
    emit, account, webhook, receiver, api_client
):
    old_secret = webhook.secret
    emit(account)
    new_secret = api_client.post(f"/webhooks/{webhook.id}/rotate_secret").json()["secret"]
    emit(account)

    first, second = receiver.wait_for(2)
    assert stripe.WebhookSignature.verify_header(
        first.body.decode(), first.headers["X-Service-Signature"], old_secret, tolerance=300
    )
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            second.body.decode(), second.headers["X-Service-Signature"], old_secret, tolerance=300
        )
    assert stripe.WebhookSignature.verify_header(
        second.body.decode(), second.headers["X-Service-Signature"], new_secret, tolerance=300
    )


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_it_retries_server_errors_timeouts_and_rate_limits(
    emit, account, webhook, receiver, status
):
    receiver.script(status, status, 200)
    emit(account)

    requests = receiver.wait_for(3)
    assert len({json.loads(r.body)["id"] for r in requests}) == 1  # stable across retries
    assert [(r.attempt, r.status_code) for r in rows(webhook)] == [
        (1, status),
        (2, status),
        (3, 200),
    ]
    assert rows(webhook)[0].error == f"HTTP {status}"
    assert rows(webhook)[0].delivered_at is None
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 0


@pytest.mark.parametrize("status", [400, 401, 403, 404, 410, 422, 301, 302])
def test_it_does_not_retry_other_client_errors_or_redirects(
    emit, account, webhook, receiver, status
):
    receiver.script(*[Reply(status, headers={"Location": receiver.url + "/moved"})])
    emit(account)

    receiver.wait_for(1)
    (row,) = rows(webhook)
    assert row.status_code == status and row.delivered_at is None
    assert "not retried" in row.error or "redirects are not followed" in row.error
    assert len(receiver.requests) == 1  # no retry, and the redirect was not followed
    assert DeliveryJob.objects.get().state == "failed"
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 1


def test_it_gives_up_after_five_attempts(emit, account, webhook, receiver):
    receiver.default = Reply(503)
    emit(account)

    assert [r.attempt for r in rows(webhook)] == [1, 2, 3, 4, 5]
    assert len(receiver.requests) == 5
    assert DeliveryJob.objects.get().state == "failed"
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 1  # one failed delivery, not five
    assert webhook.disabled_at is None


def test_network_errors_are_retried(emit, account):
    from tests.support.ports import free_port

    webhook = WebhookFactory(account=account, url=f"http://127.0.0.1:{free_port()}/hook")
    emit(account)

    attempts = rows(webhook)
    assert [r.attempt for r in attempts] == [1, 2, 3, 4, 5]
    assert all(r.status_code is None for r in attempts)
    assert attempts[0].error.startswith("connection failed:")
    assert "refused" in attempts[0].error.lower()


def test_a_slow_receiver_times_out_and_is_retried(emit, account, webhook, receiver, settings):
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.2
    receiver.script(Reply(200, delay=0.6), 200)
    emit(account)

    assert [(r.attempt, r.status_code) for r in rows(webhook)] == [(1, None), (2, 200)]
    assert rows(webhook)[0].error == "timed out after 0.2s"


@pytest.mark.parametrize(
    ("deadline", "cut_in"),
    [(0.3, "the status line"), (1.5, "the body")],  # its head takes ~0.8 s to trickle
)
def test_a_receiver_trickling_its_answer_is_cut_off_at_the_total_deadline(
    emit, account, webhook, receiver, settings, deadline, cut_in
):
    # A byte every 20 ms: no read waits long, the whole answer would take 10 s and be a 200.
    settings.WEBHOOK_TIMEOUT_SECONDS = deadline
    receiver.script(Reply(200, body=b"x" * 460, trickle=0.02), 200)
    emit(account)

    first, second = rows(webhook)
    assert (first.attempt, first.status_code, first.delivered_at) == (1, None, None)
    assert first.error == f"timed out after {deadline:g}s"
    assert (second.attempt, second.status_code) == (2, 200)  # a timeout is retried
    assert DeliveryJob.objects.get().state == "succeeded"


def test_response_bodies_are_read_capped(emit, account, webhook, receiver):
    receiver.script(Reply(200, body=b"x" * 300_000))
    emit(account)

    (row,) = rows(webhook)
    assert row.status_code == 200
    assert len(row.response_excerpt) == 1024


def test_an_answer_with_a_nul_byte_is_recorded(emit, account, webhook, receiver):
    """PostgreSQL's text holds no NUL: the excerpt shows it as U+FFFD, the delivery counts."""
    receiver.script(Reply(200, body=b"ok\x00done"))
    emit(account)

    (row,) = rows(webhook)
    assert (row.status_code, row.response_excerpt) == (200, "ok\ufffddone")
    assert DeliveryJob.objects.get().state == "succeeded"


def test_five_failed_deliveries_disable_and_patch_re_enables(
    emit, account, webhook, receiver, api_client
):
    receiver.default = Reply(410)
    for _ in range(4):
        emit(account)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 4 and webhook.disabled_at is None

    emit(account)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 5 and webhook.disabled_at is not None
    listed = api_client.get("/webhooks").json()[0]
    assert listed["disabled_at"] is not None and listed["consecutive_failures"] == 5

    emit(account)  # a disabled webhook gets nothing
    assert len(receiver.requests) == 5
    assert DeliveryJob.objects.count() == 5

    response = api_client.patch(
        f"/webhooks/{webhook.id}", {"webhook": {"disabled_at": None}}, format="json"
    )
    assert response.json()["disabled_at"] is None
    assert response.json()["consecutive_failures"] == 0
    receiver.default = Reply(200)
    emit(account)
    assert len(receiver.requests) == 6
    assert receiver.requests[-1].headers["X-Service-Signature"]


def test_a_2xx_resets_consecutive_failures(emit, account, receiver):
    webhook = WebhookFactory(account=account, url=receiver.url, consecutive_failures=3)
    emit(account)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 0


def test_filters_choose_the_webhooks(emit, account, other_account, receiver):
    sent_only = WebhookFactory(account=account, url=receiver.url, event_filters=["enrollment.sent"])
    everything = WebhookFactory(account=account, url=receiver.url)
    paused_only = WebhookFactory(
        account=account, url=receiver.url, event_filters=["campaign.paused", "enrollment.opened"]
    )
    WebhookFactory(account=account, url=receiver.url, disabled_at=timezone.now())
    WebhookFactory(account=other_account, url=receiver.url)

    event = emit(account, "enrollment.sent")
    assert set(DeliveryJob.objects.filter(event=event).values_list("webhook", flat=True)) == {
        sent_only.id,
        everything.id,
    }
    event = emit(account, "campaign.paused", {"campaign_id": "c1", "name": "Q4", "reason": "x"})
    assert set(DeliveryJob.objects.filter(event=event).values_list("webhook", flat=True)) == {
        everything.id,
        paused_only.id,
    }
    assert len(receiver.requests) == 4
    assert {json.loads(r.body)["type"] for r in receiver.requests} == {
        "enrollment.sent",
        "campaign.paused",
    }


def test_an_event_without_matching_webhooks_is_still_recorded(emit, account):
    event = emit(account)
    assert Event.objects.filter(pk=event.pk).exists()
    assert not DeliveryJob.objects.exists()


def test_unknown_event_types_are_a_programming_error(account):
    with pytest.raises(ValueError, match="unknown event type"):
        event_emit(account=account, event_type="enrollment.exploded", data={})


def test_an_event_rolled_back_with_its_transaction_is_never_delivered(account, webhook, receiver):
    from django.db import transaction

    with pytest.raises(RuntimeError), transaction.atomic():
        event_emit(account=account, event_type="enrollment.sent", data=DATA)
        raise RuntimeError("the state change failed")
    assert not Event.objects.exists() and not DeliveryJob.objects.exists()
    assert receiver.requests == []


def test_a_webhook_disabled_meanwhile_is_dropped(emit, account, webhook, receiver):
    emit(account, after_commit=False)
    webhook.disabled_at = timezone.now()
    webhook.save()

    assert webhook_drain(webhook_id=webhook.id) == 1
    assert DeliveryJob.objects.get().state == "dropped"
    assert receiver.requests == [] and rows(webhook) == []


def test_a_webhook_deleted_meanwhile_is_gone(emit, account, webhook, receiver):
    emit(account, after_commit=False)
    webhook.delete()
    assert webhook_drain(webhook_id=webhook.id) == 0
    assert receiver.requests == []


def test_a_claimed_job_is_not_sent_twice(emit, account, webhook, receiver):
    emit(account)
    job = DeliveryJob.objects.get()
    assert webhook_drain(webhook_id=webhook.id) == 0  # finished already
    DeliveryJob.objects.filter(id=job.id).update(
        state="delivering", next_attempt_at=timezone.now() + timedelta(minutes=5)
    )
    assert webhook_drain(webhook_id=webhook.id) == 0  # another worker holds the lease
    assert len(receiver.requests) == 1


def test_one_lane_delivers_a_burst_in_order(emit, account, webhook, receiver, settings):
    settings.WEBHOOK_MAX_IN_FLIGHT = 1
    events = [emit(account, data={"n": n}, after_commit=False) for n in range(3)]
    assert webhook_drain(webhook_id=webhook.id) == 3
    assert [json.loads(r.body)["data"]["n"] for r in receiver.requests] == [0, 1, 2]
    assert {json.loads(r.body)["id"] for r in receiver.requests} == {
        str(job.id) for job in DeliveryJob.objects.filter(event__in=events)
    }
    assert DeliveryJob.objects.filter(state="succeeded").count() == 3


def test_deliveries_keep_their_connections_open_across_drains(emit, account, webhook, receiver):
    for n in range(8):
        emit(account, data={"n": n}, after_commit=False)
    assert webhook_drain(webhook_id=webhook.id, linger=0) == 8
    for n in range(8, 12):
        emit(account, data={"n": n}, after_commit=False)
    assert webhook_drain(webhook_id=webhook.id, linger=0) == 4  # another drain
    # Never more connections than lanes (4 requests in flight at most), across the two
    # drains: each request went over a connection an earlier one left open, if any was.
    assert len({r.peer for r in receiver.requests}) <= 4


def test_a_receivers_cookie_is_never_sent_back(receiver):
    """Deliveries of every account share a worker's connections: a cookie one receiver
    set must never go with another account's deliveries to the same host."""
    receiver.default = Reply(200, headers={"Set-Cookie": "session=account-a; Path=/"})
    for _ in range(2):
        result = http_post_signed(url=receiver.url, body=b"{}", secret="whsec_x", message_id="m")
        assert result.ok
    assert [r.headers.get("Cookie") for r in receiver.requests] == [None, None]


def test_a_drain_costs_a_statement_per_claim_and_per_record(
    emit, account, webhook, receiver, django_assert_num_queries
):
    for n in range(3):
        emit(account, data={"n": n}, after_commit=False)
    # One lane: each delivery its claim (the webhook read with it; the first also looks
    # for failing attempts) and its record. Besides: the lease taken, the claim that
    # finds nothing left, the lease given back and the look once more.
    with django_assert_num_queries(3 * 2 + 4):
        assert webhook_drain(webhook_id=webhook.id, lanes=1, linger=0) == 3
    assert [json.loads(r.body)["data"]["n"] for r in receiver.requests] == [0, 1, 2]
    assert set(DeliveryJob.objects.values_list("state", flat=True)) == {"succeeded"}
    assert [(r.attempt, r.status_code, r.error) for r in rows(webhook)] == [(1, 200, None)] * 3


def test_a_burst_rings_the_drain_once(
    account, webhook, monkeypatch, django_capture_on_commit_callbacks
):
    from webhooks.tasks import webhook_drain as task

    sent = []
    monkeypatch.setattr(task, "apply_async", lambda args, kwargs=None, **kw: sent.append(args))
    with django_capture_on_commit_callbacks(execute=True):
        for _ in range(3):
            event_emit(account=account, event_type="enrollment.sent", data=DATA)
    assert sent == [(str(webhook.id),)]  # the drain, once started, claims all three
    webhook.refresh_from_db()
    assert webhook.drain_enqueued_at is not None


def test_the_lease_bounds_a_batch(emit, account, webhook, receiver, settings):
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 1  # shorter than one worst-case attempt
    for _ in range(3):
        emit(account, after_commit=False)
    # Each batch sends its first job and releases the rest; every job still goes.
    assert webhook_drain(webhook_id=webhook.id) >= 3
    assert len(receiver.requests) == 3
    assert [r.attempt for r in WebhookDelivery.objects.all()] == [1, 1, 1]
    assert DeliveryJob.objects.filter(state="succeeded").count() == 3


def test_a_lapsed_claim_is_taken_over_and_the_lost_attempt_recorded(
    emit, account, webhook, receiver
):
    emit(account, after_commit=False)
    # As if a worker's drain claimed attempt 1 and died: the lease ran out.
    DeliveryJob.objects.update(
        state="delivering", attempts=1, next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    Webhook.objects.update(drain_enqueued_at=None)  # that drain had taken its message

    assert jobs_sweep() == 1
    assert [(r.attempt, r.status_code, r.error) for r in rows(webhook)] == [
        (1, None, LOST_ATTEMPT_ERROR),
        (2, 200, None),
    ]
    assert len(receiver.requests) == 1
    job = DeliveryJob.objects.get()
    assert (job.state, job.attempts) == ("succeeded", 2)


def test_a_lapsed_fifth_attempt_ends_the_delivery(emit, account, webhook, receiver):
    emit(account, after_commit=False)
    DeliveryJob.objects.update(
        state="delivering", attempts=5, next_attempt_at=timezone.now() - timedelta(seconds=1)
    )
    Webhook.objects.update(drain_enqueued_at=None)
    jobs_sweep()
    job = DeliveryJob.objects.get()
    assert (job.state, job.attempts) == ("failed", 5)
    assert [r.attempt for r in rows(webhook)] == [5]
    assert receiver.requests == []
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 1


def test_a_job_the_broker_refused_is_swept_later(emit, account, webhook, receiver, monkeypatch):
    from webhooks.tasks import webhook_drain as task

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    with monkeypatch.context() as patch:
        patch.setattr(task, "apply_async", broker_down)
        emit(account)  # the commit succeeds; the enqueue fails quietly
    assert DeliveryJob.objects.get().state == "pending"
    webhook.refresh_from_db()
    assert webhook.drain_enqueued_at is None
    assert receiver.requests == []

    assert jobs_sweep() == 1
    assert len(receiver.wait_for(1)) == 1
    assert jobs_sweep() == 0


def test_the_sweep_leaves_a_rung_drain_alone_until_it_is_stale(emit, account, webhook, receiver):
    emit(account, after_commit=False)
    Webhook.objects.update(drain_enqueued_at=timezone.now())  # a drain is on the broker
    assert jobs_sweep() == 0
    Webhook.objects.update(drain_enqueued_at=timezone.now() - timedelta(minutes=6))  # lost
    assert jobs_sweep() == 1
    assert len(receiver.requests) == 1


def test_later_retries_wait_in_the_database(emit, account, webhook, receiver, settings):
    settings.WEBHOOK_RETRY_SCHEDULE = []
    receiver.script(503)
    before = timezone.now()
    emit(account)

    job = DeliveryJob.objects.get()
    assert job.state == "pending" and job.attempts == 1
    assert (
        before + timedelta(seconds=59)
        < job.next_attempt_at
        < timezone.now() + timedelta(seconds=61)
    )
    assert jobs_sweep() == 0  # not due yet
    DeliveryJob.objects.update(next_attempt_at=timezone.now())
    assert jobs_sweep() == 1
    assert [(r.attempt, r.status_code) for r in rows(webhook)] == [(1, 503), (2, 200)]


def test_retry_schedule(settings):
    settings.WEBHOOK_RETRY_SCHEDULE = []
    assert [retry_delay(n) for n in range(1, 5)] == [60, 480, 1620, 3840]
    settings.WEBHOOK_RETRY_SCHEDULE = [5, 10]
    assert [retry_delay(n) for n in range(1, 5)] == [5, 10, 10, 10]


def test_a_rotation_in_the_middle_of_a_drain_signs_the_next_attempt(
    emit, account, webhook, receiver, monkeypatch, settings
):
    from webhooks import delivery, services

    settings.WEBHOOK_MAX_IN_FLIGHT = 1
    old_secret = webhook.secret
    new_secrets = []
    real_record = delivery.answers_record

    def record_then_rotate(**kwargs):
        failed = real_record(**kwargs)
        if not new_secrets:  # right after the first attempt
            new_secrets.append(services.webhook_rotate_secret(webhook=webhook).secret)
        return failed

    monkeypatch.setattr(delivery, "answers_record", record_then_rotate)
    for _ in range(2):
        emit(account, after_commit=False)
    webhook_drain(webhook_id=webhook.id)

    first, second = receiver.wait_for(2)
    header = second.headers["X-Service-Signature"]
    assert stripe.WebhookSignature.verify_header(
        first.body.decode(), first.headers["X-Service-Signature"], old_secret, tolerance=300
    )
    assert stripe.WebhookSignature.verify_header(
        second.body.decode(), header, new_secrets[0], tolerance=300
    )
    with pytest.raises(stripe.SignatureVerificationError):
        stripe.WebhookSignature.verify_header(
            second.body.decode(), header, old_secret, tolerance=300
        )


def test_a_disable_in_the_middle_of_a_drain_drops_the_rest(
    emit, account, webhook, receiver, monkeypatch, settings
):
    from webhooks import delivery, services

    settings.WEBHOOK_MAX_IN_FLIGHT = 1
    real_record = delivery.answers_record

    def record_then_disable(**kwargs):
        failed = real_record(**kwargs)
        services.webhook_update(webhook=webhook, disabled_at=timezone.now())
        return failed

    monkeypatch.setattr(delivery, "answers_record", record_then_disable)
    for _ in range(3):
        emit(account, after_commit=False)
    webhook_drain(webhook_id=webhook.id)

    assert len(receiver.requests) == 1
    assert sorted(DeliveryJob.objects.values_list("state", flat=True)) == [
        "dropped",
        "dropped",
        "succeeded",
    ]


def test_a_2xx_resets_a_failure_recorded_while_it_was_in_flight(
    emit, account, receiver, monkeypatch
):
    """The count read at claim time was 0; another drain recorded a failure while this
    delivery was in flight: the 2xx still resets it."""
    from webhooks import delivery

    webhook = WebhookFactory(account=account, url=receiver.url)
    real_wait = delivery.wait

    def wait_while_another_drain_fails(*args, **kwargs):
        Webhook.objects.filter(id=webhook.id).update(consecutive_failures=1)
        return real_wait(*args, **kwargs)

    monkeypatch.setattr(delivery, "wait", wait_while_another_drain_fails)
    emit(account)
    receiver.wait_for(1)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 0


def test_a_lease_shorter_than_the_longest_attempt_is_a_system_check_warning(settings):
    from django.core.management import call_command
    from django.core.management.base import SystemCheckError

    settings.WEBHOOK_TIMEOUT_SECONDS = 10
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 300
    call_command("check", fail_level="WARNING")  # passes
    settings.WEBHOOK_CLAIM_LEASE_SECONDS = 15  # the total deadline, and 5 s for the lookup
    with pytest.raises(SystemCheckError, match=r"webhooks.W001.*longest delivery attempt \(15 s\)"):
        call_command("check", fail_level="WARNING")


def _came_back(account, webhook, emit, statuses):
    """Claim one job per status and pretend their answers came back together, in this
    order (each one's `ended_at` a second after the previous)."""
    from webhooks.jobs import jobs_claim
    from webhooks.posting import AttemptResult

    for _ in statuses:
        emit(account, after_commit=False)
    claimed = jobs_claim(webhook_id=webhook.id, limit=len(statuses)).jobs
    assert len(claimed) == len(statuses)
    start = timezone.now()
    answers = []
    for n, (item, status) in enumerate(zip(claimed, statuses, strict=True)):
        ended = start + timedelta(seconds=n + 1)
        result = AttemptResult(
            started_at=start, ended_at=ended, status_code=status, retryable=status >= 500
        )
        answers.append((item, result))
    return answers


def test_answers_that_came_back_together_are_recorded_in_one_statement(
    emit, account, webhook, django_assert_num_queries, settings
):
    from webhooks.answers import answers_record

    settings.WEBHOOK_RETRY_SCHEDULE = []  # the default: a first retry after 60 s

    answers = _came_back(account, webhook, emit, [200, 200, 503, 200])
    # The attempt rows, each job's next state (succeeded, retry) and the reset of the
    # failure count: one statement, the same for 4 answers as for 40.
    with django_assert_num_queries(1):
        failed = answers_record(webhook_id=webhook.id, webhook=webhook, answers=answers)
    assert failed is True  # the 503: a delivery failed an attempt

    states = {
        item.job.id: state
        for item, _ in answers
        for state in DeliveryJob.objects.filter(id=item.job.id).values_list("state", flat=True)
    }
    assert sorted(states.values()) == ["pending", "succeeded", "succeeded", "succeeded"]
    assert WebhookDelivery.objects.filter(webhook=webhook).count() == 4
    retried = DeliveryJob.objects.get(state="pending")
    assert retried.claim_token is None and retried.attempts == 1
    assert retried.next_attempt_at > timezone.now() + timedelta(seconds=50)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 0  # the last to end was a 2xx


@pytest.mark.parametrize(
    ("statuses", "failures"),
    [([200, 400, 400], 2), ([400, 400, 200], 0), ([400, 200, 400], 1), ([200, 200], 0)],
)
def test_a_batch_counts_failures_in_the_order_the_answers_ended(
    emit, account, webhook, statuses, failures
):
    from webhooks.answers import answers_record

    answers = _came_back(account, webhook, emit, statuses)
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=2)
    failed = answers_record(webhook_id=webhook.id, webhook=webhook, answers=answers)
    assert failed is (400 in statuses)
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == failures
    assert webhook.disabled_at is None


def test_the_fifth_failure_in_a_batch_disables_the_webhook(emit, account, webhook):
    from webhooks.answers import answers_record

    answers = _came_back(account, webhook, emit, [400, 400, 200])
    Webhook.objects.filter(id=webhook.id).update(consecutive_failures=3)
    answers_record(webhook_id=webhook.id, webhook=webhook, answers=answers)
    webhook.refresh_from_db()
    # 3 + 2 reached 5 before the 2xx ended: disabled, and the 2xx then reset the count.
    assert webhook.disabled_at is not None
    assert webhook.consecutive_failures == 0
    assert sorted(DeliveryJob.objects.values_list("state", flat=True)) == [
        "failed",
        "failed",
        "succeeded",
    ]


def test_the_sweep_rings_only_the_webhooks_with_due_jobs_in_one_query(
    account, monkeypatch, django_assert_num_queries
):
    from webhooks import events

    due, later, finished, idle = (WebhookFactory(account=account) for _ in range(4))
    event = Event.objects.create(account=account, type="enrollment.sent", data={})
    now = timezone.now()
    for webhook, state, at in (
        (due, "pending", now - timedelta(seconds=1)),
        (later, "pending", now + timedelta(minutes=5)),
        (finished, "succeeded", now - timedelta(minutes=5)),
    ):
        DeliveryJob.objects.create(event=event, webhook=webhook, state=state, next_attempt_at=at)
    rung = []
    monkeypatch.setattr(
        events,
        "drains_enqueue",
        lambda *, webhook_ids: rung.extend(webhook_ids) or len(webhook_ids),
    )
    with django_assert_num_queries(1):
        assert jobs_sweep() == 1
    assert rung == [str(due.pk)]
