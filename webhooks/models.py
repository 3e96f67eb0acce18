"""Outbound webhooks: endpoints, the event outbox, delivery jobs and attempts.

Flow (docs/webhooks.md has the whole story):

    emit() ──> Event ──> one DeliveryJob per matching enabled Webhook (same transaction)
                            │  claimed by a worker (conditional UPDATE), POSTed,
                            ▼
                      WebhookDelivery: one row per HTTP attempt
"""

import uuid
from typing import Any

from django.core.serializers.json import DjangoJSONEncoder
from django.db import models
from django.db.models import Q
from django.utils import timezone
from psycopg.types.json import Json, Jsonb

from config.crypto import EncryptedTextField

# The event types, their one list: producers (outreach.events) emit these names, the
# API validates filters against them, the catalog describes them (docs/webhooks.md).
ENROLLMENT_SENT = "enrollment.sent"
ENROLLMENT_OPENED = "enrollment.opened"
ENROLLMENT_REPLIED = "enrollment.replied"
ENROLLMENT_BOUNCED = "enrollment.bounced"
ENROLLMENT_UNSUBSCRIBED = "enrollment.unsubscribed"
CREDENTIAL_DISABLED = "credential.disabled"
CAMPAIGN_PAUSED = "campaign.paused"
ENROLLMENT_CLICKED = "enrollment.clicked"
ENROLLMENT_BRANCHED = "enrollment.branched"
REPLY_RECEIVED = "reply.received"
REPLY_LABELLED = "reply.labelled"
CREDENTIAL_THROTTLED = "credential.throttled"
APPROVAL_REQUESTED = "approval.requested"
APPROVAL_DECIDED = "approval.decided"

# The 7 event types of version 1.
EVENT_TYPES = (
    ENROLLMENT_SENT,
    ENROLLMENT_OPENED,
    ENROLLMENT_REPLIED,
    ENROLLMENT_BOUNCED,
    ENROLLMENT_UNSUBSCRIBED,
    CREDENTIAL_DISABLED,
    CAMPAIGN_PAUSED,
)
# Opt-in types: delivered only to webhooks whose filters name them; `*` stays the
# version 1 set, so no receiver gets a type it did not ask for (docs/webhooks.md).
OPT_IN_EVENT_TYPES = (
    ENROLLMENT_CLICKED,
    ENROLLMENT_BRANCHED,
    REPLY_RECEIVED,
    REPLY_LABELLED,
    CREDENTIAL_THROTTLED,
    APPROVAL_REQUESTED,
    APPROVAL_DECIDED,
)
ALL_EVENTS = "*"


class Webhook(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    url = models.URLField(max_length=2048)
    event_filters = models.JSONField(default=list)
    # The signing secret, encrypted at rest (config.crypto): it must be recoverable
    # to sign, so it cannot be hashed. Never logged, never in the admin.
    secret = EncryptedTextField(editable=False)
    consecutive_failures = models.PositiveIntegerField(default=0)
    disabled_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    # Set when a drain task for this webhook was put on the broker and has not
    # started yet: further events need no message of their own (one per burst).
    drain_enqueued_at = models.DateTimeField(null=True, blank=True, editable=False)
    # The running drain's lease (webhooks.delivery): one drain per webhook at a time.
    drain_token = models.UUIDField(null=True, blank=True, editable=False)
    drain_until = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [
            models.Index(
                fields=["account"],
                name="webhook_enabled_idx",
                condition=Q(disabled_at__isnull=True),
            )
        ]

    def __str__(self) -> str:
        return self.url

    @property
    def is_enabled(self) -> bool:
        return self.disabled_at is None

    def wants(self, event_type: str) -> bool:
        if event_type in self.event_filters:
            return True
        return ALL_EVENTS in self.event_filters and event_type in EVENT_TYPES


class WrittenJSONField(models.JSONField):
    """JSON kept as it was written, keys in their order: PostgreSQL's `json` type, not
    `jsonb` (which sorts keys by length). An event's `data` reaches receivers in the
    order its producer (and the docs) gives, e.g. enrollment_id first. Nothing queries
    inside it, so nothing needs jsonb's operators."""

    def db_type(self, connection: Any) -> str:
        return "json"

    def get_db_prep_value(self, value: Any, connection: Any, prepared: bool = False) -> Any:
        adapted = super().get_db_prep_value(value, connection, prepared)
        if isinstance(adapted, Jsonb):  # sent as json: jsonb would reorder it on the way
            return Json(adapted.obj, dumps=adapted.dumps)
        return adapted

    def from_db_value(self, value: Any, expression: Any, connection: Any) -> Any:
        # psycopg decodes json columns itself (Django asks for text only for jsonb).
        if isinstance(value, dict | list):
            return value
        return super().from_db_value(value, expression, connection)


class Event(models.Model):
    """The outbox row: one per emitted event, written in the producer's transaction."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index: events are read by id (a job's) and by age (the retention prune); only
    # an account's deletion looks them up by account (a rare staff action), and every
    # event (one per send) would write an entry.
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    type = models.CharField(max_length=64)
    data = WrittenJSONField(encoder=DjangoJSONEncoder)
    # The retention prune (webhooks.operations).
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.type} {self.id}"


class DeliveryJob(models.Model):
    """The delivery of one event to one webhook, across all its attempts.

    Its id is the envelope `id` receivers dedupe on: stable across retries.
    `next_attempt_at` is when a worker may claim it next: the retry time while
    pending, the lease expiry while delivering (a lost worker's job comes due again).
    """

    class State(models.TextChoices):
        PENDING = "pending"
        DELIVERING = "delivering"
        SUCCEEDED = "succeeded"
        FAILED = "failed"
        DROPPED = "dropped"  # the webhook was disabled before the job ran

    ACTIVE_STATES = (State.PENDING, State.DELIVERING)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: deliveryjob_event_webhook leads with it.
    event = models.ForeignKey(Event, on_delete=models.CASCADE, related_name="jobs", db_index=False)
    # Indexed: a webhook's deletion (its jobs go with it).
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="jobs")
    state = models.CharField(max_length=12, choices=State.choices, default=State.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    next_attempt_at = models.DateTimeField()
    claim_token = models.UUIDField(null=True, blank=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            # One job per event and webhook; also an event's jobs (the retention prune
            # keeps events that still have one, an event's deletion).
            models.UniqueConstraint(fields=["event", "webhook"], name="deliveryjob_event_webhook")
        ]
        indexes = [
            # A drain's claim: one webhook's due jobs, oldest first. Also the sweep's
            # (one probe per webhook: jobs_sweep) and the metrics' pass over the active
            # jobs: no index of its own by due time, which every job (one per send)
            # would write an entry in.
            models.Index(
                fields=["webhook", "next_attempt_at"],
                name="deliveryjob_webhook_due_idx",
                condition=Q(state__in=["pending", "delivering"]),
            ),
            models.Index(
                fields=["created_at"], name="deliveryjob_failed_idx", condition=Q(state="failed")
            ),
            # A replay's query: one webhook's deliveries that ended failed since a time.
            models.Index(
                fields=["webhook", "finished_at"],
                name="deliveryjob_replay_idx",
                condition=Q(state="failed"),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.id} ({self.state}, {self.attempts} attempts)"


class WebhookDelivery(models.Model):
    """One HTTP attempt of a delivery."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    webhook = models.ForeignKey(Webhook, on_delete=models.CASCADE, related_name="deliveries")
    # SET_NULL: pruning finished jobs must not take newer attempt rows with it.
    job = models.ForeignKey(
        DeliveryJob, on_delete=models.SET_NULL, null=True, blank=True, related_name="deliveries"
    )
    event_type = models.CharField(max_length=64)
    attempt = models.PositiveSmallIntegerField()
    status_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.TextField(null=True, blank=True)
    # The first bytes of the receiver's answer, for the admin only.
    response_excerpt = models.TextField(blank=True, default="")
    duration_ms = models.PositiveIntegerField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    # A test delivery (POST /webhooks/:id/test): an example event, no job, never counted
    # toward consecutive_failures.
    test = models.BooleanField(default=False)
    # When the attempt started (rows are written in batches, after the fact).
    created_at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name_plural = "webhook deliveries"
        indexes = [
            models.Index(fields=["webhook", "-created_at", "-id"], name="webhookdelivery_page_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.event_type} attempt {self.attempt} -> {self.status_code or self.error}"

    @property
    def state(self) -> str:
        """pending (a test delivery a worker has not made yet), succeeded or failed."""
        if self.delivered_at is not None:
            return "succeeded"
        if self.status_code is None and self.error is None:
            return "pending"
        return "failed"
