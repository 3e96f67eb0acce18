"""Event emission, the outbox: the one way producers emit webhook events.

    from webhooks.events import event_emit
    event_emit(account, "enrollment.sent", {...})  # inside the state change's transaction

`event_emit` writes an Event and one DeliveryJob per matching enabled webhook in
the caller's transaction, and rings those webhooks' drains in it (webhooks.sql: the
statement and its parameters, which a producer writing its change in one statement of
its own splices into it); the drain messages go out after commit
(`drains_publish_on_commit`). The drains themselves are in
webhooks.delivery. The beat sweep (`jobs_sweep`) rings the drain of any webhook with
due jobs the fast path missed, after the fact (`drains_enqueue`), as redeliveries do.
"""

import logging
from functools import partial

from celery import current_app
from django.db import connection, transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from webhooks.models import EVENT_TYPES, DeliveryJob, Event, Webhook
from webhooks.sql import EVENT_EMIT_SQL, event_params, ring_stale

logger = logging.getLogger(__name__)

DRAIN_TASK = "webhooks.tasks.webhook_drain"

__all__ = [
    "EVENT_TYPES",
    "drains_enqueue",
    "drains_publish",
    "drains_publish_on_commit",
    "event_emit",
    "jobs_sweep",
]


def event_emit(account, event_type: str, data: dict) -> Event:
    """Record an event and queue its delivery to every matching enabled webhook.

    `account` is an Account or its id; `data` a JSON-serialisable dict (datetimes,
    UUIDs and Decimals allowed). Raises ValueError for a type outside EVENT_TYPES and
    OPT_IN_EVENT_TYPES.

    Call it inside the transaction that makes the state change: the event, its jobs and
    the ring of their webhooks' drains (webhooks.sql) are one statement of it and commit
    or roll back with it. After commit, a drain message goes out for each webhook the
    ring marked (the fast path); if that fails (broker down, process killed), the beat
    sweep finds the due jobs anyway.
    """
    params = event_params(account, event_type, data)
    with connection.cursor() as cursor:
        cursor.execute(EVENT_EMIT_SQL, params)
        (rung,) = cursor.fetchone()
    event = Event(id=params["event_pk"], account_id=params["account"], type=event_type, data=data)
    event.created_at = params["created"]
    event._state.adding = False  # as if read back: it is in the database
    event._state.db = connection.alias
    drains_publish_on_commit(rung)
    return event


def drains_publish_on_commit(rung) -> None:
    """After the caller's commit, a drain message for each webhook its statement's ring
    returned (`rung`: webhooks.sql); nothing if it rolls back."""
    if rung:
        webhook_ids = [str(pk) for pk in rung]
        transaction.on_commit(partial(drains_publish, webhook_ids=webhook_ids), robust=True)


def drains_enqueue(*, webhook_ids: list[str]) -> int:
    """Make sure a drain task is on its way for each webhook, for jobs already
    committed (the sweep, redeliveries, a drain handing over); returns how many
    messages were sent.

    A webhook whose drain is already enqueued (and not stale), or running (its
    lease is live), needs no second message: that drain claims every job due
    while it runs, and looks once more after releasing its lease. Never raises:
    a message the broker refused clears the mark, so the next sweep rings again.
    """
    now = timezone.now()
    stale = ring_stale(now)
    rung = []
    for webhook_id in dict.fromkeys(webhook_ids):
        if Webhook.objects.filter(
            Q(drain_enqueued_at__isnull=True) | Q(drain_enqueued_at__lte=stale),
            Q(drain_until__isnull=True) | Q(drain_until__lte=now),
            id=webhook_id,
        ).update(drain_enqueued_at=now):
            rung.append(webhook_id)
    return drains_publish(webhook_ids=rung)


def drains_publish(*, webhook_ids: list[str]) -> int:
    """Put a drain message on the broker for each webhook whose enqueued mark the
    caller has just set (drains_enqueue, or a producer's ring: event_emit, the sending
    engine's statement), or whose ring found its row held (webhooks.sql). Never raises: a message the broker
    refused clears the mark, so the next sweep rings again."""
    # By name, as the broker knows it: the drain task (webhooks.tasks) runs the drains
    # (webhooks.delivery), which ring a fresh drain through here when they hand over. A
    # signature, not the registry: a process that never imported the task's module sends
    # it by name.
    webhook_drain = current_app.signature(DRAIN_TASK)
    sent = 0
    for webhook_id in webhook_ids:
        try:
            # retry=False: fail at once if the broker is down, do not hold the caller.
            webhook_drain.apply_async((str(webhook_id),), retry=False)
            sent += 1
        except Exception:
            logger.warning(
                "webhook %s drain not enqueued; the sweep will ring again",
                webhook_id,
                exc_info=True,
            )
            Webhook.objects.filter(id=webhook_id).update(drain_enqueued_at=None)
    return sent


def jobs_sweep(*, limit: int = 1000) -> int:
    """Ring the drain of every webhook with due jobs the fast path missed:
    never enqueued (broker down), lost on the broker, retries whose time has
    come, and claims whose lease lapsed (a worker died). One probe per webhook of
    its due jobs (deliveryjob_webhook_due_idx, the drain's own index)."""
    due = DeliveryJob.objects.filter(
        webhook_id=OuterRef("pk"),
        state__in=DeliveryJob.ACTIVE_STATES,
        next_attempt_at__lte=timezone.now(),
    )
    webhook_ids = [
        str(pk)
        for pk in Webhook.objects.filter(Exists(due))
        .order_by()
        .values_list("pk", flat=True)[:limit]
    ]
    return drains_enqueue(webhook_ids=webhook_ids) if webhook_ids else 0
