"""Delivery jobs: the claim of due jobs for an attempt (webhooks.delivery's drains call
it; module docstring there), one statement. The record of what came back is
webhooks.answers.

Which jobs a claim takes (the rules, all in CLAIMABLE_CTES):

- a healthy webhook's due jobs, oldest first, up to the limit;
- a disabled webhook's due jobs likewise, to be dropped;
- while a delivery of the webhook is failing (it failed an attempt and is not finished,
  or the last deliveries failed), its retries first, and a new delivery starts only
  while the failures so far and the deliveries under way stay below
  FAILURES_BEFORE_DISABLE: a dead endpoint gets 5 deliveries x 5 attempts before it is
  disabled, however many events wait for it.

Jobs the caller has requests in flight for are never claimed again meanwhile (an
attempt that outlives its claim's lease is not made a second time by its own drain).
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import NamedTuple

from django.conf import settings
from django.db import connection
from django.utils import timezone

from webhooks.models import DeliveryJob, Event, Webhook

MAX_ATTEMPTS = 5  # per delivery
FAILURES_BEFORE_DISABLE = 5  # consecutive failed deliveries

_SECRET = Webhook._meta.get_field("secret")  # decrypts the stored value (config.crypto)


@dataclass
class ClaimedJob:
    job: DeliveryJob
    lost_attempt: int | None  # the attempt a lost worker left unfinished
    lost_at: datetime | None  # when that attempt's claim was made
    attempt: int | None  # the attempt to make now; None when the job is exhausted


class Claim(NamedTuple):
    webhook: Webhook | None  # as it is now; None once deleted
    jobs: list[ClaimedJob]
    # The caller's `attempt_failed` for its next claim: False when it is known that no
    # delivery of the webhook has failed an attempt and is not finished (the caller said
    # so, or the database did, and no lost attempt was claimed now: a lost attempt is
    # a failed one), else None (the next claim looks).
    attempt_failed: bool | None


# A due job of the webhook that the caller has no request in flight for (the partial
# index deliveryjob_webhook_due_idx: the same states, as literals).
_DUE = """j.webhook_id = %(webhook)s AND j.state IN ('pending', 'delivering')
      AND j.next_attempt_at <= %(now)s AND j.id <> ALL(%(in_flight)s::uuid[])"""

# The jobs a claim takes now (`picked`: id and due time), by the module docstring's
# rules. `attempt_failed`: whether a delivery failed an attempt and is not finished,
# when the caller knows (a drain that has seen no failed attempt since it looked);
# NULL: the statement looks (`mode`). Parameters: webhook, now, limit, in_flight,
# attempt_failed.
CLAIMABLE_CTES = f"""
hook AS (
    SELECT id, url, secret, consecutive_failures, disabled_at
    FROM webhooks_webhook WHERE id = %(webhook)s
),
mode AS MATERIALIZED (
    SELECT h.consecutive_failures AS failures, a.failed AS attempt_failed,
        h.disabled_at IS NULL AND (h.consecutive_failures > 0 OR a.failed) AS failing
    FROM hook AS h, LATERAL (SELECT COALESCE(%(attempt_failed)s::boolean, EXISTS (
        SELECT FROM webhooks_deliveryjob AS f
        WHERE f.webhook_id = h.id AND f.state IN ('pending', 'delivering')
          AND (f.state = 'pending' AND f.attempts > 0 OR f.attempts > 1)
    )) AS failed OFFSET 0) AS a  -- OFFSET 0: looked for once, not once per use
),
first AS (
    -- Every due job (healthy, or disabled: to be dropped), or a failing webhook's due
    -- retries. Two scans, each gated as a whole, so each stays one walk of the index in
    -- due order that stops at the limit.
    (SELECT j.id, j.next_attempt_at FROM webhooks_deliveryjob AS j
    WHERE {_DUE}
      AND NOT (SELECT failing FROM mode)
    ORDER BY j.next_attempt_at
    LIMIT %(limit)s::integer)
    UNION ALL
    (SELECT j.id, j.next_attempt_at FROM webhooks_deliveryjob AS j
    WHERE {_DUE}
      AND j.attempts > 0 AND (SELECT failing FROM mode)
    ORDER BY j.next_attempt_at
    LIMIT %(limit)s::integer)
),
room AS (
    -- The new deliveries a failing webhook may start besides its retries.
    SELECT GREATEST(0, LEAST(
        %(limit)s::integer - (SELECT count(*) FROM first),
        {FAILURES_BEFORE_DISABLE} - m.failures - (
            SELECT count(*) FROM webhooks_deliveryjob AS u
            WHERE u.webhook_id = %(webhook)s AND u.state IN ('pending', 'delivering')
              AND u.attempts > 0)
    )) AS n
    FROM mode AS m WHERE m.failing
),
fresh AS (
    SELECT j.id, j.next_attempt_at FROM webhooks_deliveryjob AS j
    WHERE {_DUE}
      AND j.attempts = 0
    ORDER BY j.next_attempt_at
    LIMIT (SELECT COALESCE(max(n), 0) FROM room)
),
picked AS (
    SELECT id, next_attempt_at FROM first UNION ALL SELECT id, next_attempt_at FROM fresh
)"""  # noqa: S608 - a constant of the code; every value is a parameter

# The claim: the webhook as it is now and the picked jobs claimed, oldest first, each
# by a conditional UPDATE (the state and the due time re-checked under the row's lock,
# so a job goes to exactly one claimer; a lapsed claim told apart by its token, so its
# lost attempt can be recorded), with their events.
CLAIM_SQL = f"""
WITH {CLAIMABLE_CTES},
claimed AS (
    UPDATE webhooks_deliveryjob AS j
    SET state = 'delivering', attempts = j.attempts + 1, next_attempt_at = %(lease_end)s,
        claim_token = CASE WHEN j.state = 'pending' THEN %(fresh)s::uuid ELSE %(lost)s::uuid END
    FROM picked
    WHERE j.id = picked.id AND j.state IN ('pending', 'delivering')
      AND j.next_attempt_at <= %(now)s
    RETURNING j.id, j.event_id, j.attempts, j.claim_token, j.created_at,
        picked.next_attempt_at AS was_due
)
SELECT h.id, h.url, h.secret, h.consecutive_failures, h.disabled_at,
    (SELECT attempt_failed FROM mode),
    c.id, c.event_id, c.attempts, c.claim_token, c.created_at, c.was_due,
    e.account_id, e.type, e.data, e.created_at
FROM hook AS h
LEFT JOIN (claimed AS c JOIN webhooks_event AS e ON e.id = c.event_id) ON true
ORDER BY c.created_at
"""  # noqa: S608 - constants of the code; every value is a parameter

# Whether a claim would take a job now, claiming nothing.
CLAIMABLE_EXISTS_SQL = f"WITH {CLAIMABLE_CTES}\nSELECT EXISTS (SELECT FROM picked)"  # noqa: S608


def jobs_claim(
    *, webhook_id, limit: int, attempt_failed: bool | None = None, in_flight=()
) -> Claim:
    """Claim up to `limit` due jobs of one webhook (the module docstring's rules), each
    for an attempt made right away, in one statement that also reads the webhook as it
    is now (a rotated secret, a new URL or a disable applies to the very next request).
    `attempt_failed`: CLAIMABLE_CTES's; `in_flight`: ids of jobs the caller has requests
    in flight for."""
    now = timezone.now()
    lease = timedelta(seconds=settings.WEBHOOK_CLAIM_LEASE_SECONDS)
    lease_end = now + lease
    fresh_token, lost_token = uuid.uuid4(), uuid.uuid4()
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIM_SQL,
            {
                **_claimable_params(webhook_id, now, limit, attempt_failed, in_flight),
                "lease_end": lease_end,
                "fresh": fresh_token,
                "lost": lost_token,
            },
        )
        rows = cursor.fetchall()
    if not rows:
        return Claim(None, [], attempt_failed)
    pk, url, secret, failures, disabled_at, failed = rows[0][:6]
    webhook = Webhook(
        id=pk,
        url=url,
        secret=_SECRET.from_db_value(secret, None, connection) or "",
        consecutive_failures=failures,
        disabled_at=disabled_at,
    )
    webhook._state.adding = False
    claimed = []
    for row in rows:
        if row[6] is None:
            continue  # the webhook's row alone: nothing claimed
        item = _claimed(row, webhook_id=pk, lease=lease, lease_end=lease_end, lost_token=lost_token)
        claimed.append(item)
        failed = failed or item.lost_attempt is not None
    return Claim(webhook, claimed, None if failed else False)


def jobs_claimable(webhook_id) -> bool:
    """Whether the webhook has a job a claim would take now."""
    with connection.cursor() as cursor:
        cursor.execute(
            CLAIMABLE_EXISTS_SQL, _claimable_params(webhook_id, timezone.now(), 1, None, ())
        )
        return cursor.fetchone()[0]


def _claimable_params(webhook_id, now, limit: int, attempt_failed, in_flight) -> dict:
    return {
        "webhook": webhook_id,
        "now": now,
        "limit": max(limit, 0),
        "in_flight": list(in_flight),
        "attempt_failed": attempt_failed,
    }


def _claimed(row, *, webhook_id, lease: timedelta, lease_end, lost_token) -> ClaimedJob:
    """A claimed job of CLAIM_SQL's row, with its event."""
    job_id, event_id, attempts, token, created_at, was_due = row[6:12]
    account_id, event_type, data, event_created_at = row[12:]
    job = DeliveryJob(
        id=job_id,
        event_id=event_id,
        webhook_id=webhook_id,
        state=DeliveryJob.State.DELIVERING,
        attempts=attempts,
        next_attempt_at=lease_end,
        claim_token=token,
        created_at=created_at,
    )
    job._state.adding = False
    job.event = Event(
        id=event_id, account_id=account_id, type=event_type, data=data, created_at=event_created_at
    )
    job.event._state.adding = False
    lost = attempts - 1 if token == lost_token else None
    # A lapsed claim's due time was its lease's end: that claim was made a lease earlier.
    return ClaimedJob(
        job=job,
        lost_attempt=lost,
        lost_at=was_due - lease if lost is not None else None,
        attempt=None if lost is not None and lost >= MAX_ATTEMPTS else attempts,
    )
