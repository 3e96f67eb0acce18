"""Outreach resources: mailboxes (SMTP credentials), campaigns and their steps,
contacts, contact imports and enrollments (a contact in a campaign).

The sending engine and intake build on these rows; see docs/outreach.md for the
state rules.
"""

import uuid

from django.core.validators import MaxValueValidator
from django.db import models
from django.db.models import F, Q

from config.crypto import EncryptedTextField


class Security(models.TextChoices):
    STARTTLS = "starttls"
    SSL = "ssl"
    NONE = "none"


# The longest gap a mailbox's pace may ask for (a day).
MAX_INTERVAL_SECONDS = 86_400


class SmtpCredential(models.Model):
    """A mailbox the account sends from (and, with IMAP settings, reads replies from)."""

    class RelayProvider(models.TextChoices):
        MAILGUN = "mailgun"
        SENDGRID = "sendgrid"

    class DisabledReason(models.TextChoices):
        BOUNCE_RATE_EXCEEDED = "bounce_rate_exceeded"
        MANUAL = "manual"

    class AuthMethod(models.TextChoices):
        PASSWORD = "password"  # noqa: S105 - a method name, not a secret
        OAUTH_GOOGLE = "oauth_google", "OAuth (Google)"
        OAUTH_MICROSOFT = "oauth_microsoft", "OAuth (Microsoft)"

    class OAuthStatus(models.TextChoices):
        CONNECTED = "connected"
        REAUTHORIZATION_REQUIRED = "reauthorization_required"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="smtp_credentials"
    )
    from_email = models.EmailField(max_length=254)
    from_name = models.CharField(max_length=200, blank=True, default="")

    smtp_host = models.CharField(max_length=255)
    smtp_port = models.PositiveIntegerField(default=587)
    smtp_username = models.CharField(max_length=255, blank=True, default="")
    # Encrypted at rest (config.crypto); reading the attribute gives the plaintext.
    smtp_password = EncryptedTextField(blank=True, default="")
    smtp_security = models.CharField(max_length=10, choices=Security.choices, default="starttls")

    imap_host = models.CharField(max_length=255, blank=True, default="")
    imap_port = models.PositiveIntegerField(null=True, blank=True)
    imap_username = models.CharField(max_length=255, blank=True, default="")
    imap_password = EncryptedTextField(blank=True, default="")
    imap_security = models.CharField(max_length=10, choices=Security.choices, default="ssl")
    # IMAP polling state (intake): UIDs are only comparable under one UIDVALIDITY.
    imap_uidvalidity = models.BigIntegerField(null=True, blank=True)
    imap_last_uid = models.BigIntegerField(null=True, blank=True)
    imap_last_polled_at = models.DateTimeField(null=True, blank=True)
    imap_last_error = models.TextField(blank=True, default="")
    imap_last_error_at = models.DateTimeField(null=True, blank=True)

    daily_limit = models.PositiveIntegerField(default=50)
    # Pace: between two sends from this mailbox (across all its campaigns) the scheduler
    # waits a random gap drawn from [min, max] seconds; 0 / 0 turns pacing off.
    min_interval_seconds = models.PositiveIntegerField(
        default=120, validators=[MaxValueValidator(MAX_INTERVAL_SECONDS)]
    )
    max_interval_seconds = models.PositiveIntegerField(
        default=300, validators=[MaxValueValidator(MAX_INTERVAL_SECONDS)]
    )
    # When the mailbox may be given its next send: set under the row's lock when a claim
    # is made (claim time + the drawn gap), raised after a send to at least its time +
    # min_interval_seconds (outreach.scheduler, outreach.sending). Null: now.
    next_send_earliest_at = models.DateTimeField(null=True, blank=True)
    # Sends on `daily_sent_on` (UTC date); the engine resets it when the date changes.
    daily_sent_count = models.PositiveIntegerField(default=0)
    daily_sent_on = models.DateField(null=True, blank=True)

    relay_provider = models.CharField(
        max_length=10, choices=RelayProvider.choices, blank=True, default=""
    )
    # Mailgun: the HTTP webhook signing key. SendGrid: the signed-event-webhook public key.
    relay_signing_key = EncryptedTextField(blank=True, default="")

    disabled_at = models.DateTimeField(null=True, blank=True)
    disabled_reason = models.CharField(
        max_length=32, choices=DisabledReason.choices, blank=True, default=""
    )
    sent_count = models.PositiveBigIntegerField(default=0)
    bounced_count = models.PositiveBigIntegerField(default=0)
    # Last SMTP failure that is not a bounce (authentication, connection), for the API and admin.
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)

    # OAuth 2.0 mailboxes (outreach.oauth): SMTP and IMAP log in with XOAUTH2 and an
    # access token instead of the passwords. "" for password mailboxes.
    auth_method = models.CharField(
        max_length=16, choices=AuthMethod.choices, default=AuthMethod.PASSWORD
    )
    oauth_status = models.CharField(
        max_length=32, choices=OAuthStatus.choices, blank=True, default=""
    )
    # Encrypted at rest; never returned by the API. The access token is kept so that not
    # every connection needs a refresh; it is refreshed shortly before it expires.
    oauth_refresh_token = EncryptedTextField(blank=True, default="")
    oauth_access_token = EncryptedTextField(blank=True, default="")
    oauth_access_token_expires_at = models.DateTimeField(null=True, blank=True)
    # A refresh in progress (one at a time per mailbox, across workers) until then.
    oauth_refreshing_until = models.DateTimeField(null=True, blank=True)

    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    # Written only by outreach.oauth, under its refresh lease: a save of the whole row
    # elsewhere (an API PATCH) must not put back tokens it read before a refresh.
    OAUTH_TOKEN_FIELDS = (
        "oauth_refresh_token",
        "oauth_access_token",
        "oauth_access_token_expires_at",
        "oauth_refreshing_until",
    )

    class Meta:
        ordering = ["-created_at"]
        # Keyset pages (config.api.pagination): the order, tie-breaker included.
        indexes = [
            models.Index(fields=["account", "created_at", "id"], name="credential_account_page_idx")
        ]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_interval_seconds__lte=F("max_interval_seconds"))
                & Q(max_interval_seconds__lte=MAX_INTERVAL_SECONDS),
                name="credential_pace_valid",
                violation_error_message=(
                    "min_interval_seconds must not exceed max_interval_seconds, "
                    f"which is at most {MAX_INTERVAL_SECONDS}."
                ),
            )
        ]

    def __str__(self) -> str:
        return self.from_email

    @property
    def is_enabled(self) -> bool:
        return self.disabled_at is None

    @property
    def uses_oauth(self) -> bool:
        return self.auth_method != self.AuthMethod.PASSWORD

    @property
    def is_paced(self) -> bool:
        return self.max_interval_seconds > 0


class OAuthAuthorization(models.Model):
    """One started `POST /smtp_credentials/oauth`: the single-use `state` sent to the
    provider, bound to the account, with the PKCE code verifier and the OpenID nonce
    the callback needs. The state itself is not stored, only its SHA-256, so a
    database read does not yield a usable callback."""

    class Provider(models.TextChoices):
        GOOGLE = "google"
        MICROSOFT = "microsoft"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    state_hash = models.CharField(max_length=64, unique=True)
    code_verifier = EncryptedTextField(blank=True, default="")
    nonce = models.CharField(max_length=64)
    # The mailbox settings given with the request (daily_limit, from_name), applied to
    # the credential the callback creates.
    credential_settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["expires_at"], name="oauth_authorization_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.provider} authorization {self.id}"


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        ACTIVE = "active"
        PAUSED = "paused"
        COMPLETED = "completed"

    class PausedReason(models.TextChoices):
        MANUAL = "manual"
        ALL_CREDENTIALS_DISABLED = "all_credentials_disabled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="campaigns"
    )
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    paused_reason = models.CharField(
        max_length=32, choices=PausedReason.choices, blank=True, default=""
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    credentials = models.ManyToManyField(SmtpCredential, blank=True, related_name="campaigns")
    timezone = models.CharField(max_length=64, default="UTC")
    # {"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]} (ISO weekdays), or null:
    # always open. Read it through outreach.windows.SendWindow.from_json.
    send_window = models.JSONField(null=True, blank=True)
    bounce_threshold_percent = models.FloatField(default=5.0)
    track_opens = models.BooleanField(default=True)
    stop_on_reply = models.BooleanField(default=True)
    # A reply also stops the other active enrollments whose contact shares the replier's
    # email domain (consumer mail domains excepted: outreach.stopping).
    stop_on_domain_reply = models.BooleanField(default=False)
    # Append an opt-out line to each body part that does not place {{unsubscribe_url}}.
    unsubscribe_footer = models.BooleanField(default=False)
    # The send window in each contact's own time zone (Contact.timezone), falling back
    # to `timezone` for contacts without one.
    send_in_contact_timezone = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="campaign_account_page_idx"),
            models.Index(fields=["status"], name="campaign_status_idx"),
        ]

    def __str__(self) -> str:
        return self.name


class CampaignStep(models.Model):
    """One email of the sequence. `position` is 1-based; Enrollment.current_step counts
    steps sent, so the next step to send is position current_step + 1."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()
    # Empty on a later step: sent as a reply in the thread ("Re: <previous subject>").
    subject = models.CharField(max_length=998, blank=True, default="")
    body_text = models.TextField()
    body_html = models.TextField(blank=True, default="")
    # Step 1: from dispatch; later steps: from the previous step's send.
    delay_minutes = models.PositiveIntegerField(default=0)
    # A/B variants besides the step's own content (variant "A"): [{subject, body_text,
    # body_html}, ...], variants "B", "C", ... in order (outreach.variants).
    variants = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["campaign", "position"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "position"], name="step_position_unique")
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} step {self.position}"


class Contact(models.Model):
    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="contacts"
    )
    email = models.EmailField(max_length=254)
    # lower(email): the per-account uniqueness key, a plain column so imports can
    # upsert on it (ON CONFLICT needs columns, not expressions).
    email_lower = models.CharField(max_length=254, editable=False)
    first_name = models.CharField(max_length=200, blank=True, default="")
    last_name = models.CharField(max_length=200, blank=True, default="")
    company = models.CharField(max_length=200, blank=True, default="")
    fields = models.JSONField(default=dict, blank=True)
    # IANA name (outreach.windows.timezone_valid), or "": the campaign's zone applies.
    timezone = models.CharField(max_length=64, blank=True, default="")
    # Either one suppresses the contact: never enrolled or sent to again.
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    bounced_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["account", "email_lower"], name="contact_email_ci_unique"
            )
        ]
        # Keyset pages (config.api.pagination): the order, tie-breaker included.
        indexes = [
            models.Index(fields=["account", "created_at", "id"], name="contact_account_page_idx")
        ]

    def __str__(self) -> str:
        return self.email

    def save(self, *args, **kwargs):
        self.email_lower = self.email.lower()
        super().save(*args, **kwargs)

    @property
    def is_suppressed(self) -> bool:
        return self.unsubscribed_at is not None or self.bounced_at is not None


class Suppression(models.Model):
    """An address the account must never send to again, whatever happens to its contact
    row: it outlives DELETE /contacts/:id, so re-adding the address (API, import,
    outreach) brings the contact back suppressed (outreach.suppression).

    One row per (address, reason); the first time wins (`at` is never moved later).
    """

    class Reason(models.TextChoices):
        UNSUBSCRIBED = "unsubscribed"
        BOUNCED = "bounced"
        COMPLAINED = "complained"  # a spam complaint: suppresses as an unsubscribe

    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="suppressions"
    )
    email_lower = models.CharField(max_length=254)
    reason = models.CharField(max_length=12, choices=Reason.choices)
    at = models.DateTimeField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["account", "email_lower", "reason"], name="suppression_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.email_lower} ({self.reason})"


class ContactImport(models.Model):
    class Status(models.TextChoices):
        PENDING = "pending"
        PROCESSING = "processing"
        COMPLETED = "completed"
        FAILED = "failed"

    class Format(models.TextChoices):
        CSV = "csv"
        JSON = "json"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="contact_imports"
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.SET_NULL, null=True, blank=True, related_name="imports"
    )
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.PENDING)
    source_format = models.CharField(max_length=4, choices=Format.choices)
    filename = models.CharField(max_length=255, blank=True, default="")
    # The uploaded bytes (CSV, or the JSON contacts array), kept in the database so any
    # worker can process them; emptied once the import ends.
    source_data = models.BinaryField(default=b"")
    total_rows = models.PositiveIntegerField(null=True, blank=True)
    processed_rows = models.PositiveIntegerField(default=0)
    created_count = models.PositiveIntegerField(default=0)
    updated_count = models.PositiveIntegerField(default=0)
    skipped_count = models.PositiveIntegerField(default=0)
    # First 100 {row, email, message} of the rows skipped as invalid.
    errors = models.JSONField(default=list, blank=True)
    failure_reason = models.TextField(blank=True, default="")
    # Worker runs that claimed it; each batch is committed only by the current run.
    attempts = models.PositiveSmallIntegerField(default=0)
    heartbeat_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="import_account_page_idx"),
            models.Index(
                fields=["status", "heartbeat_at"],
                name="import_unfinished_idx",
                condition=Q(status__in=["pending", "processing"]),
            ),
        ]

    def __str__(self) -> str:
        return f"import {self.id} ({self.status})"


class Enrollment(models.Model):
    """A contact in a campaign, and where it is in the sequence."""

    class Status(models.TextChoices):
        PENDING = "pending"  # enrolled, not dispatched
        SCHEDULED = "scheduled"  # dispatched, no step sent yet
        SENT = "sent"  # a step was sent, more may follow
        COMPLETED = "completed"  # all steps sent
        REPLIED = "replied"
        BOUNCED = "bounced"
        UNSUBSCRIBED = "unsubscribed"
        FAILED = "failed"
        STOPPED = "stopped"  # ended by a rule or by hand, not by the contact

    class StopReason(models.TextChoices):
        MANUAL = "manual"
        DOMAIN_REPLY = "domain_reply"

    ACTIVE_STATUSES = (Status.PENDING, Status.SCHEDULED, Status.SENT)
    # Statuses whose next_send_at the scheduler watches.
    DUE_STATUSES = (Status.SCHEDULED, Status.SENT)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="enrollments")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="enrollments")
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    # Number of steps sent; the next one is CampaignStep.position == current_step + 1.
    current_step = models.PositiveSmallIntegerField(default=0)
    next_send_at = models.DateTimeField(null=True, blank=True)
    # The mailbox of the thread: follow-ups go out from it, replies are looked for in it.
    credential = models.ForeignKey(
        SmtpCredential,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="enrollments",
    )
    dispatched_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # last step sent
    opened_at = models.DateTimeField(null=True, blank=True)
    replied_at = models.DateTimeField(null=True, blank=True)
    bounced_at = models.DateTimeField(null=True, blank=True)
    bounce_reason = models.TextField(null=True, blank=True)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(
        max_length=16, choices=StopReason.choices, blank=True, default=""
    )
    # The A/B variant drawn for each step, {"<position>": "B"}, drawn at the step's first
    # send attempt and kept for its retries (outreach.variants).
    variants = models.JSONField(default=dict, blank=True)
    # Temporary send failures (4xx, connection) so far, and the last one; `failed` past a bound.
    send_attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # The step and variant ("2B") whose message the open, reply or bounce answered: the
    # last step sent when it arrived ("" before any). Per-variant stats count these.
    opened_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    replied_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    bounced_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "contact"], name="enrollment_unique")
        ]
        indexes = [
            # Keyset pages (config.api.pagination), all and by status: the order,
            # tie-breaker included.
            models.Index(
                fields=["campaign", "status", "created_at", "id"],
                name="enrollment_status_page_idx",
            ),
            models.Index(
                fields=["campaign", "created_at", "id"], name="enrollment_campaign_page_idx"
            ),
            # The scheduler's scan: due enrollments by next_send_at.
            models.Index(
                fields=["next_send_at"],
                name="enrollment_due_idx",
                condition=Q(status__in=["scheduled", "sent"]),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contact_id} in {self.campaign_id} ({self.status})"


class Message(models.Model):
    """One email accepted by an SMTP server for one step of one enrollment.

    Its Message-ID is what replies (In-Reply-To / References), delivery status
    reports and relay-provider events are matched against.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    enrollment = models.ForeignKey(Enrollment, on_delete=models.CASCADE, related_name="messages")
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    # Step position (1-based) at send time; steps can be edited or removed later.
    step = models.PositiveSmallIntegerField()
    # The Message-ID header without angle brackets, e.g. "abc123@sender.example".
    message_id = models.CharField(max_length=255, unique=True)
    to_email = models.EmailField(max_length=254)
    subject = models.CharField(max_length=998, blank=True, default="")
    # The step's A/B variant this message carried ("A": the step's own content).
    variant = models.CharField(max_length=1, default="A")
    sent_at = models.DateTimeField()
    # The server took the whole message but its reply to the final dot never came (the
    # connection dropped, or it timed out): it may or may not have been accepted. It is
    # counted as sent and never sent again (docs/sending.md, "Unknown outcomes").
    reply_seen = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]
        indexes = [models.Index(fields=["enrollment", "step"], name="message_enrollment_step_idx")]

    def __str__(self) -> str:
        return f"<{self.message_id}> step {self.step} to {self.to_email}"


# --- sending engine -------------------------------------------------------------------


class CampaignStats(models.Model):
    """A campaign's enrollment counts, kept on write (outreach.enrollments): a campaign's
    stats are one row read however many enrollments it has.

    enrolled: enrollments; sent: enrollments with at least one step sent; opened /
    replied / bounced / unsubscribed: enrollments where that happened; stopped: ended by a
    rule or by hand. Each changes in the transaction of the enrollment change it counts;
    `manage.py campaign_stats` recounts.
    """

    campaign = models.OneToOneField(
        Campaign, on_delete=models.CASCADE, primary_key=True, related_name="stats_row"
    )
    enrolled = models.IntegerField(default=0, db_default=0)
    sent = models.IntegerField(default=0, db_default=0)
    opened = models.IntegerField(default=0, db_default=0)
    replied = models.IntegerField(default=0, db_default=0)
    bounced = models.IntegerField(default=0, db_default=0)
    unsubscribed = models.IntegerField(default=0, db_default=0)
    stopped = models.IntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "campaign stats"

    def __str__(self) -> str:
        return f"stats of {self.campaign_id}"


class StepVariantStats(models.Model):
    """One A/B variant of one step of a campaign, counted on write (outreach.enrollments):
    sent, the messages that carried it; opened / replied / bounced, the enrollments whose
    open, reply or bounce answered it (Enrollment.opened_on, ...: the last step sent when
    it arrived). GET /campaigns/:id/stats reads these rows."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    step = models.PositiveSmallIntegerField()
    variant = models.CharField(max_length=1)
    sent = models.IntegerField(default=0, db_default=0)
    opened = models.IntegerField(default=0, db_default=0)
    replied = models.IntegerField(default=0, db_default=0)
    bounced = models.IntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "step variant stats"
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "step", "variant"], name="step_variant_stats_unique"
            )
        ]

    def __str__(self) -> str:
        return f"step {self.step}{self.variant} of {self.campaign_id}"


class CredentialCampaignStats(models.Model):
    """Send verdicts and bounces of one mailbox in one campaign: the bounce rate that
    auto-disables a credential (outreach.bounces) is bounces / sends of this row.

    `sends` counts messages the server gave a verdict on: accepted (Message rows) and
    permanently rejected at send time (a synchronous bounce never becomes a Message, but
    it was an attempt to that address from this mailbox). Kept as counters, updated with
    F() in the transactions that send and bounce, so the rate is one row read.
    """

    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.CASCADE, related_name="campaign_stats"
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="credential_stats"
    )
    sends = models.PositiveIntegerField(default=0)
    bounces = models.PositiveIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["credential", "campaign"], name="credential_campaign_stats_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.credential_id} in {self.campaign_id}: {self.bounces}/{self.sends}"

    @property
    def bounce_rate(self) -> float:
        """Percent; 0 before the first send."""
        return 100.0 * self.bounces / self.sends if self.sends else 0.0


class SendClaim(models.Model):
    """One enrollment step handed to a sending task: the claim that keeps every other
    scheduler and worker off it, and the record of how far its send got.

    The scheduler creates it (with the enrollment's next_send_at moved to `lease_until`,
    so it is not due meanwhile) and reserves a unit of the mailbox's daily limit. The
    sender sets `sending_at` (a conditional UPDATE) right before the SMTP transaction,
    and deletes the claim in the transaction that records the outcome. A claim left
    behind by a dead worker is found when its lease lapses: never started, the
    enrollment is simply due again; started (`sending_at` set), the outcome is unknown:
    it is recorded as sent with its reply unseen and never sent again (docs/sending.md,
    "Unknown outcomes").
    """

    enrollment = models.OneToOneField(
        Enrollment, on_delete=models.CASCADE, primary_key=True, related_name="send_claim"
    )
    # Identifies one scheduler hand-off; a task only sends the claims of its own batch.
    batch_id = models.UUIDField()
    credential = models.ForeignKey(SmtpCredential, on_delete=models.CASCADE, related_name="+")
    step = models.PositiveSmallIntegerField()
    claimed_at = models.DateTimeField()
    lease_until = models.DateTimeField()
    sending_at = models.DateTimeField(null=True, blank=True)
    # Set with sending_at: the message on its way, so that a send whose worker was lost
    # is recorded as the message it was (docs/sending.md, "Unknown outcomes").
    message_id = models.CharField(max_length=255, blank=True, default="")
    subject = models.CharField(max_length=998, blank=True, default="")
    to_email = models.CharField(max_length=254, blank=True, default="")

    class Meta:
        indexes = [
            models.Index(fields=["batch_id"], name="sendclaim_batch_idx"),
            models.Index(fields=["lease_until"], name="sendclaim_lease_idx"),
        ]

    def __str__(self) -> str:
        return f"claim of {self.enrollment_id} step {self.step}"


# --- end sending engine ---------------------------------------------------------------


# --- intake: relay-provider webhook replay guard ----------------------------------------


class RelayWebhookToken(models.Model):
    """A Mailgun webhook `signature.token` already accepted, so a captured request
    cannot be replayed. Only needed while its timestamp is inside the 5-minute
    window; the intake beat task deletes older rows."""

    token = models.CharField(max_length=255, unique=True)
    credential = models.ForeignKey(SmtpCredential, on_delete=models.CASCADE, related_name="+")
    received_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"relay token {self.token[:8]}..."


# --- end intake ---
