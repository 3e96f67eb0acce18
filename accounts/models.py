import uuid
from datetime import datetime

from django.db import models
from django.db.models import Q
from django.db.models.functions import Lower
from django.utils import timezone

from config.crypto import EncryptedTextField


class Account(models.Model):
    """The tenant. Every resource and every API key belongs to exactly one account.

    It is also what DRF sees as `request.user` once a key authenticates.
    """

    class TrackingDomainStatus(models.TextChoices):
        PENDING = "pending"
        VERIFIED = "verified"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    email = models.EmailField(max_length=254)
    name = models.CharField(max_length=200, blank=True, default="")
    plan = models.ForeignKey("plans.Plan", on_delete=models.PROTECT, related_name="accounts")
    psp_customer_id = models.CharField(max_length=255, null=True, blank=True, unique=True)
    psp_subscription_id = models.CharField(max_length=255, null=True, blank=True, db_index=True)
    psp_subscription_status = models.CharField(max_length=32, blank=True, default="")
    psp_current_period_start = models.DateTimeField(null=True, blank=True)
    psp_current_period_end = models.DateTimeField(null=True, blank=True)
    # When the signup address was proven (the emailed link, accounts.verification). Null: not
    # yet; with SIGNUP_EMAIL_VERIFICATION on, the account may not dispatch until it is.
    email_verified_at = models.DateTimeField(null=True, blank=True)
    # The host of the account's open pixels and click links, a CNAME to the service's host
    # (outreach.domains.tracking); used only while `verified`. "": the service's own host.
    tracking_domain = models.CharField(max_length=253, blank=True, default="")
    tracking_domain_status = models.CharField(
        max_length=10, choices=TrackingDomainStatus.choices, blank=True, default=""
    )
    tracking_domain_checked_at = models.DateTimeField(null=True, blank=True)
    # The default of campaigns' max_per_recipient_domain_per_day (outreach.domain_cap);
    # null: no cap.
    max_per_recipient_domain_per_day = models.PositiveIntegerField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    # DRF's IsAuthenticated reads these from request.user.
    is_authenticated = True
    is_anonymous = False

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(Lower("email"), name="account_email_ci_unique"),
            models.UniqueConstraint(
                fields=["tracking_domain"],
                condition=~Q(tracking_domain=""),
                name="account_tracking_domain_unique",
            ),
        ]

    def __str__(self) -> str:
        return self.email

    @property
    def email_verified(self) -> bool:
        return self.email_verified_at is not None


class ApiKey(models.Model):
    class ClientKind(models.TextChoices):
        DIRECT = "direct"
        MCP = "mcp"
        SDK = "sdk"

    class Role(models.TextChoices):
        """What the key may do (config.api.roles, docs/accounts.md "Roles")."""

        ADMIN = "admin"
        SENDER = "sender"
        DRAFTER = "drafter"
        READER = "reader"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="api_keys")
    prefix = models.CharField(
        max_length=12, help_text="First 12 characters of the token; safe to log."
    )
    # SHA-256 hex digest of the full token. The plaintext is never stored.
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    label = models.CharField(max_length=200, blank=True, default="")
    client_kind = models.CharField(
        max_length=10, choices=ClientKind.choices, default=ClientKind.DIRECT
    )
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.ADMIN)
    # Contacts the key may dispatch, enrol or answer per UTC day (KeySendCount); null: no
    # limit but the plan's.
    daily_send_limit = models.PositiveIntegerField(null=True, blank=True)
    # After it the key is refused as a revoked one and no longer counts as active.
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(
                fields=["account"], name="apikey_active_idx", condition=Q(revoked_at__isnull=True)
            ),
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="apikey_account_page_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.label or 'unlabelled'})"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None and not self.is_expired

    @property
    def is_expired(self) -> bool:
        return self.expires_at is not None and self.expires_at <= timezone.now()


def active_keys_q(now: datetime | None = None) -> Q:
    """The filter of the keys that authenticate: not revoked, not expired."""
    now = now or timezone.now()
    return Q(revoked_at__isnull=True) & (Q(expires_at__isnull=True) | Q(expires_at__gt=now))


class KeySendCount(models.Model):
    """Contacts one key dispatched, enrolled or answered on one UTC day: its
    daily_send_limit's counter, raised in the send's own transaction
    (accounts.send_limits)."""

    api_key = models.ForeignKey(ApiKey, on_delete=models.CASCADE, related_name="+")
    day = models.DateField(help_text="The UTC day.")
    count = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["api_key", "day"], name="key_send_count_unique")
        ]

    def __str__(self) -> str:
        return f"{self.api_key_id} {self.day} {self.count}"


class ApiRequestCount(models.Model):
    """Authenticated requests per account, client_kind and hour: the traffic
    attribution of GET /billing/usage (by_client_kind)."""

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="+")
    client_kind = models.CharField(max_length=10, choices=ApiKey.ClientKind.choices)
    hour = models.DateTimeField(help_text="Start of the hour (UTC).")
    count = models.PositiveBigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "hour", "client_kind"], name="api_request_count_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.client_kind} {self.hour:%Y-%m-%d %H}:00 {self.count}"


class IdempotencyRecord(models.Model):
    """One Idempotency-Key of one account (docs/accounts.md, "Idempotency-Key").

    The row is claimed (inserted, in progress) before the handler runs; the
    unique (account, key) makes two concurrent claims race safely. The stored
    response is written in the same transaction as the handler's side effects.
    Its body (the rendered bytes, UTF-8 text) is encrypted: it can hold secrets shown
    once (API key plaintext, webhook secrets).
    """

    class Status(models.TextChoices):
        IN_PROGRESS = "in_progress"
        COMPLETED = "completed"

    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    # SHA-256 of method, path and body: a reuse with another request is a conflict.
    fingerprint = models.CharField(max_length=64)
    method = models.CharField(max_length=10)
    path = models.CharField(max_length=2048)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.IN_PROGRESS)
    # When the current claim was taken: an in-progress claim older than the lease
    # belongs to a request that died and may be taken over.
    locked_at = models.DateTimeField()
    response_status = models.PositiveSmallIntegerField(null=True, blank=True)
    response_headers = models.JSONField(default=dict, blank=True)
    response_body = EncryptedTextField(default="", blank=True, editable=False)
    created_at = models.DateTimeField(db_index=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "key"], name="idempotency_account_key_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.account_id} {self.key} {self.status}"


class RateLimitBucket(models.Model):
    """Fixed-window counters of the SQL rate limiter (embedded mode, or no Redis).

    One row per bucket (`<scope>:<identity>`); an atomic upsert increments it or
    restarts its window, so several processes sharing the database agree.
    """

    bucket = models.CharField(max_length=200, primary_key=True)
    window_started_ms = models.BigIntegerField()
    count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.bucket} {self.count}"


class AuditEvent(models.Model):
    """One request that changed an account's data (docs/audit.md): who, what, when.

    Written in the change's own transaction (config.api.audit), never with a value or a
    secret: `changes` names the fields a request set, nothing more.
    """

    class ActorType(models.TextChoices):
        API_KEY = "api_key"
        STAFF = "staff"
        PUBLIC = "public"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(Account, on_delete=models.CASCADE, related_name="+")
    # Shown as `occurred_at`; named for the keyset pages (config.api.pagination).
    created_at = models.DateTimeField()
    actor_type = models.CharField(max_length=10, choices=ActorType.choices)
    # The key's id, the staff user's id, or "" for the public.
    actor_id = models.CharField(max_length=64, blank=True, default="")
    # The key's prefix or the staff user's username.
    actor_name = models.CharField(max_length=150, blank=True, default="")
    actor_client_kind = models.CharField(max_length=10, blank=True, default="")
    action = models.CharField(max_length=100)
    resource_type = models.CharField(max_length=50)
    resource_id = models.CharField(max_length=64, blank=True, default="")
    request_id = models.CharField(max_length=200, blank=True, default="")
    idempotency_key = models.CharField(max_length=255, blank=True, default="")
    ip = models.GenericIPAddressField(null=True, blank=True)
    changes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages, newest first, and the `since` filter.
            models.Index(fields=["account", "created_at", "id"], name="auditevent_page_idx"),
            # Retention deletes by age across accounts.
            models.Index(fields=["created_at"], name="auditevent_created_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.resource_type} {self.resource_id} by {self.actor_type}"
