"""Delivery: one drain per webhook, many requests in flight per worker.

A drain owns its webhook while it runs (a lease on the Webhook row: `drain_token`,
`drain_until`, renewed as it goes), so two drains never work one endpoint. In a loop:

1. it claims due jobs, never more than it has free lanes (WEBHOOK_MAX_IN_FLIGHT): a
   claim counts the attempt it is about to make, and that request leaves at once, so
   an attempt is counted only for a request that is actually made;
2. each request goes to the worker's HTTP pool (threads, WEBHOOK_MAX_CONCURRENT_REQUESTS
   in all), which only talks HTTP; the drain's own thread does every database write;
3. outcomes are recorded as soon as they come back, those that came back together in
   one transaction (the attempt rows, each job's next state, the webhook's failure
   count): a killed worker re-sends at most the requests that were in flight;
4. when nothing is due and nothing is in flight it waits a moment for new jobs
   (WEBHOOK_DRAIN_LINGER_SECONDS; the watch, webhooks.watch, wakes it when one comes),
   so a trickle of events keeps one drain instead of a new drain task per event; a
   failing webhook's drain does not wait;
5. it ends when that moment passed with nothing new, after DRAIN_TIME_BUDGET_SECONDS (a
   fresh drain message takes over), or when the worker shuts down (it stops claiming,
   finishes what is in flight and rings a drain for the rest).

Leaving, it never strands a job. A producer rings inside its transaction (webhooks.sql)
and holds the drain's lock until it commits; a drain gives its lease back only while no
producer holds that lock (`_lease_leave`), else it waits for those producers' jobs, so
a producer that found the lease held can count on this drain. Rings made after a commit
(the sweep, redeliveries: drains_enqueue) find the lease held and send nothing, so once
the lease is given back the drain looks once more. A drain that must leave while a
producer holds the lock (time budget, shutdown, a lost lease) rings a fresh drain.

A slow or hanging endpoint holds only its own lanes. While FAILURES_BEFORE_DISABLE of
its deliveries wait for a retry, a webhook starts no new delivery: a dead endpoint is
disabled after about 5 deliveries x 5 attempts, not after every queued event was tried.
"""

import threading
import time
import uuid
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import timedelta

from django.conf import settings
from django.db import connection
from django.utils import timezone

from config.db import connection_release
from config.worker import stopping
from webhooks.answers import answers_record
from webhooks.events import drains_enqueue
from webhooks.jobs import ClaimedJob, jobs_claim, jobs_claimable
from webhooks.models import Webhook
from webhooks.posting import AttemptResult, envelope_bytes, http_post_signed
from webhooks.sql import DRAIN_LEAVE_SQL, LEASE_TAKE_SQL
from webhooks.watch import watch

DRAIN_TIME_BUDGET_SECONDS = 60  # then the drain hands over to a fresh message
# The drain's lease on its webhook (30 s, or the claim lease when that is shorter);
# renewed every third of it while the drain runs, so a drain whose worker died is
# replaced by the next sweep after at most this long.
DRAIN_LEASE_SECONDS = 30
# The drain wakes at least this often to renew its lease and look for new jobs.
DRAIN_POLL_SECONDS = 0.5
# A drain that cannot leave yet (a producer that rang has not committed) tries again
# after this long, or as soon as that producer's jobs are due.
DRAIN_LEAVE_RETRY_SECONDS = 0.1
# Once an answer is back, the drain waits this much longer for the rest of its requests
# (sent together, they tend to come back together) and records them in one go.
DRAIN_GATHER_SECONDS = 0.005


# ---------------------------------------------------------------- the HTTP pool

_http_pool: ThreadPoolExecutor | None = None
_http_pool_lock = threading.Lock()


def http_pool() -> ThreadPoolExecutor:
    """The process's request threads (created on first use, never in a parent that
    forks: a forked child would inherit a pool without its threads)."""
    global _http_pool
    with _http_pool_lock:
        if _http_pool is None:
            _http_pool = ThreadPoolExecutor(
                max_workers=settings.WEBHOOK_MAX_CONCURRENT_REQUESTS,
                thread_name_prefix="webhook-http",
            )
        return _http_pool


# ---------------------------------------------------------------- fair shares


class AccountDrains:
    """The drains this worker process runs, per account. An account runs at most
    WEBHOOK_ACCOUNT_MAX_DRAINS at once here: a drain holds one of the worker's threads
    (and up to its lanes of the HTTP pool) for as long as its endpoint makes it wait,
    so without a bound one account's many slow endpoints would take every thread while
    other accounts' drains wait in the queue behind them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict = {}

    def enter(self, account_id) -> bool:
        """Count one more drain of the account, unless it is at its bound."""
        with self._lock:
            running = self._running.get(account_id, 0)
            if running >= settings.WEBHOOK_ACCOUNT_MAX_DRAINS:
                return False
            self._running[account_id] = running + 1
            return True

    def leave(self, account_id) -> None:
        with self._lock:
            running = self._running.pop(account_id, 0) - 1
            if running > 0:
                self._running[account_id] = running


account_drains = AccountDrains()


# ---------------------------------------------------------------- the drain's lease
# `lease`: how long it lasts (DRAIN_LEASE_SECONDS), worked out once per drain.


def _lease_take(webhook_id, token: uuid.UUID, lease: timedelta):
    """Take (or keep) the drain's lease; the webhook's account id when it is taken, else
    None (another drain holds it, or the webhook is gone)."""
    now = timezone.now()
    with connection.cursor() as cursor:
        cursor.execute(LEASE_TAKE_SQL, [token, now + lease, webhook_id, now, token])
        row = cursor.fetchone()
    return row[0] if row else None


def _lease_renew(webhook_id, token: uuid.UUID, lease: timedelta) -> bool:
    return bool(
        Webhook.objects.filter(id=webhook_id, drain_token=token).update(
            drain_until=timezone.now() + lease
        )
    )


def _lease_release(webhook_id, token: uuid.UUID) -> None:
    """Give the lease back whatever producers are doing (the caller rings a drain)."""
    Webhook.objects.filter(id=webhook_id, drain_token=token).update(
        drain_token=None, drain_until=None
    )


def _lease_leave(webhook_id, token: uuid.UUID) -> bool:
    """Give the lease back unless a producer that rang while it was held has not
    committed yet (webhooks.sql): whether it was given back. A drain that cannot leave
    waits for that producer's jobs instead; one that could leave was the last to look
    for them, so no producer's jobs are left without a drain."""
    with connection.cursor() as cursor:
        cursor.execute(DRAIN_LEAVE_SQL, [webhook_id, token])
        return cursor.fetchone() is not None


# ---------------------------------------------------------------- the drain


def webhook_drain(*, webhook_id, lanes: int | None = None, linger: float | None = None) -> int:
    """Deliver every due job of one webhook (module docstring); returns how many jobs
    were worked on. Returns 0 at once when another drain holds the webhook. `linger`:
    seconds to wait for new jobs once out of them (WEBHOOK_DRAIN_LINGER_SECONDS)."""
    token = uuid.uuid4()
    lease = timedelta(seconds=min(DRAIN_LEASE_SECONDS, settings.WEBHOOK_CLAIM_LEASE_SECONDS))
    account_id = _lease_take(webhook_id, token, lease)
    if account_id is None:
        return 0
    if not account_drains.enter(account_id):
        # The account has its share of this worker's drains running: this one leaves the
        # thread to other accounts' drains. Taking the lease cleared its ring, so the
        # next sweep rings it again (by then one of the account's drains may be done).
        _lease_release(webhook_id, token)
        return 0
    lanes = lanes or settings.WEBHOOK_MAX_IN_FLIGHT
    if linger is None:
        linger = settings.WEBHOOK_DRAIN_LINGER_SECONDS
    worked = 0
    try:
        while True:
            try:
                done, handing_over = _drain_leased(webhook_id, token, lease, lanes, linger)
            except BaseException:
                _lease_release(webhook_id, token)  # the sweep rings what is left
                raise
            worked += done
            if handing_over and not _lease_leave(webhook_id, token):
                # A producer that rang while the lease was held has not committed: a
                # fresh drain takes its jobs (and the rest), on any worker.
                _lease_release(webhook_id, token)
                drains_enqueue(webhook_ids=[str(webhook_id)])
                break
            # The lease is given back. A job committed before it was, and rung after its
            # commit (the sweep, a redelivery), found the lease held and rang no drain:
            # look once more.
            if not jobs_claimable(webhook_id):
                break
            if handing_over:
                # Time budget spent, or the worker is stopping: a fresh message takes
                # over the rest, on any worker.
                drains_enqueue(webhook_ids=[str(webhook_id)])
                break
            if _lease_take(webhook_id, token, lease) is None:
                break  # another drain took the webhook meanwhile: those jobs are its
    finally:
        account_drains.leave(account_id)
    return worked


def _wait(
    webhook_id, in_flight: dict[Future, ClaimedJob], *, timeout: float, watching: bool
) -> tuple[list[tuple[ClaimedJob, AttemptResult]], bool]:
    """Wait up to `timeout` without holding a database connection for the answers of the
    requests in flight, and once one is back a moment more for the others (sent
    together, they tend to come back together); `watching`: for the watch to see a new
    job of the webhook due, too. Returns the answers back, (job, answer) each, taken out
    of `in_flight`, and whether the watch saw a job due."""
    connection_release()
    waiting: set[Future] = set(in_flight)
    wake = watch.watch(webhook_id) if watching else None
    if wake is not None:
        waiting.add(wake)
    try:
        done, pending = wait(waiting, timeout=timeout, return_when=FIRST_COMPLETED)
        if done and pending:
            done |= wait(pending, timeout=DRAIN_GATHER_SECONDS).done
    finally:
        if wake is not None:
            wake.cancel()  # waiting no more: the watch forgets it
    answers = [(in_flight.pop(future), future.result()) for future in done if future is not wake]
    return answers, wake is not None and wake in done


def _requests_start(claimed: list[ClaimedJob], webhook, in_flight: dict, *, enabled: bool):
    """Start the request of each claimed job that needs one (added to `in_flight`);
    returns the answers of those that need none (an exhausted job, a disabled webhook):
    (job, None) each."""
    if not enabled:
        return [(item, None) for item in claimed]
    unsent = []
    pool = http_pool()
    for item in claimed:
        if item.attempt is None:
            unsent.append((item, None))
            continue
        body = envelope_bytes(job=item.job, event=item.job.event)
        future = pool.submit(
            http_post_signed,
            url=webhook.url,
            body=body,
            secret=webhook.secret,
            message_id=str(item.job.id),
        )
        in_flight[future] = item
    return unsent


def _drain_leased(
    webhook_id, token: uuid.UUID, lease: timedelta, lanes: int, linger: float
) -> tuple[int, bool]:
    """The drain's loop, under its lease. Returns (jobs worked on, handed over)."""
    # Long: one loop holds the drain's states (claim, answers, waiting for work, leaving);
    # split up, they would pass its half-dozen variables back and forth.
    started = renewed = idle_since = time.monotonic()
    renew_every = lease.total_seconds() / 3
    in_flight: dict[Future, ClaimedJob] = {}
    webhook = None
    worked = 0
    # Only this drain makes attempts while it holds the lease: once it knows no attempt
    # failed (its first claim asks), it needs to ask again only after one of its own fails.
    attempt_failed: bool | None = None
    # Whether a drain that ran out of jobs waits for new ones: only for a healthy webhook
    # (as its last claim read it, with no attempt failed), whose every due job it may
    # claim at once. A failing one's new jobs wait for its retries (webhooks.jobs), so a
    # job showing up would not be work.
    enabled = healthy = False
    handing_over = False
    # Whether jobs may be due that this drain has not claimed: then it claims. After a
    # claim that found fewer than it asked for it waits to hear of new ones (the watch)
    # instead of asking again after each answer.
    look = True
    while True:
        now = time.monotonic()
        if now - renewed > renew_every:
            if not _lease_renew(webhook_id, token, lease):
                handing_over = True  # the lease lapsed and was taken: finish, leave
            renewed = now
        if now - started > DRAIN_TIME_BUDGET_SECONDS or stopping.is_set():
            handing_over = True
        claimed: list[ClaimedJob] = []
        if not handing_over and look and len(in_flight) < lanes:
            # The webhook read with each claim: a rotated secret, a new URL or a disable
            # applies to the very next request.
            limit = lanes - len(in_flight)
            webhook, claimed, attempt_failed = jobs_claim(
                webhook_id=webhook_id,
                limit=limit,
                attempt_failed=attempt_failed,
                in_flight={item.job.id for item in in_flight.values()},
            )
            enabled = healthy = False
            if webhook is not None:  # else deleted: nothing claimed
                enabled = webhook.is_enabled
                healthy = enabled and webhook.consecutive_failures == 0
            # A failing webhook's jobs come due by its retries' times: it looks each time.
            look = len(claimed) >= limit or not (healthy and attempt_failed is False)
        if claimed:
            worked += len(claimed)
            unsent = _requests_start(claimed, webhook, in_flight, enabled=enabled)
            if unsent:
                answers_record(webhook_id=webhook_id, webhook=webhook, answers=unsent)
        if claimed or in_flight:
            idle_since = time.monotonic()
        if not in_flight:
            if claimed and not handing_over:
                look = True
                continue  # what it claimed needed no request: claim again
            if handing_over:
                return worked, True
            left = linger - (time.monotonic() - idle_since)
            if left > 0 and healthy and attempt_failed is False:
                # Nothing to do: wait a moment for new jobs (a trickle of events keeps
                # one drain), woken by the watch.
                _, look = _wait(
                    webhook_id, in_flight, timeout=min(left, DRAIN_POLL_SECONDS), watching=True
                )
                continue
            if _lease_leave(webhook_id, token):
                return worked, False
            if not _lease_renew(webhook_id, token, lease):
                return worked, True  # the lease lapsed and was taken
            renewed = time.monotonic()
            # A producer that rang while the lease was held has not committed yet: its
            # jobs are this drain's. Wait for them, then try to leave again.
            _, look = _wait(webhook_id, in_flight, timeout=DRAIN_LEAVE_RETRY_SECONDS, watching=True)
            continue
        # With a lane free and no job known due, the watch may tell of a new one meanwhile.
        watching = not (look or handing_over) and len(in_flight) < lanes
        answers, woken = _wait(webhook_id, in_flight, timeout=DRAIN_POLL_SECONDS, watching=watching)
        look = look or woken
        # Everything that came back meanwhile is recorded together, then claimed for
        # together: the drain's database work is per wake-up, not per request.
        if answers and answers_record(webhook_id=webhook_id, webhook=webhook, answers=answers):
            attempt_failed = None  # a delivery failed an attempt: the next claim looks
            look = True
