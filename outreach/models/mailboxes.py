"""Mailbox models: SMTP/IMAP credentials and OAuth authorizations."""

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
        # A simulated mailbox (API.md 18): it never opens a connection.
        SIMULATOR = "simulator"

    class OAuthStatus(models.TextChoices):
        CONNECTED = "connected"
        REAUTHORIZATION_REQUIRED = "reauthorization_required"

    class PausedReason(models.TextChoices):
        COMPLAINT_RATE = "complaint_rate"

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
    # The authserv-id of the mailbox server's own Authentication-Results header
    # (outreach.intake.authentication); "" trusts the topmost header, whatever it names.
    imap_authserv_id = models.CharField(max_length=255, blank=True, default="")
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
    # min_interval_seconds (outreach.sending.scheduler, outreach.sending). Null: now.
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
    # Stopped by the complaint guard (outreach.sending.complaints): enabled, but given no
    # claim until PATCH {paused_at: null} resumes it (docs/deliverability.md).
    paused_at = models.DateTimeField(null=True, blank=True)
    paused_reason = models.CharField(
        max_length=32, choices=PausedReason.choices, blank=True, default=""
    )
    # Ramp-up: {"start_per_day": int, "increase_per_day": int} or null (outreach.mailboxes.pace),
    # counted from ramp_started_on, the UTC day of its first claim after ramp_up was set.
    ramp_up = models.JSONField(null=True, blank=True, default=None)
    ramp_started_on = models.DateField(null=True, blank=True)
    sent_count = models.PositiveBigIntegerField(default=0)
    bounced_count = models.PositiveBigIntegerField(default=0)
    # Last SMTP failure that is not a bounce (authentication, connection), for the API and admin.
    last_error = models.TextField(blank=True, default="")
    last_error_at = models.DateTimeField(null=True, blank=True)

    # OAuth 2.0 mailboxes (outreach.mailboxes.oauth): SMTP and IMAP log in with XOAUTH2 and an
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

    # The mailbox's settings an account writes (POST and PATCH /smtp_credentials), in the
    # order the API shows them; disabled_at is written by its own rule (services).
    WRITABLE_FIELDS = (
        "from_email",
        "from_name",
        "smtp_host",
        "smtp_port",
        "smtp_username",
        "smtp_password",
        "smtp_security",
        "imap_host",
        "imap_port",
        "imap_username",
        "imap_password",
        "imap_security",
        "imap_authserv_id",
        "daily_limit",
        "min_interval_seconds",
        "max_interval_seconds",
        "relay_provider",
        "relay_signing_key",
        "ramp_up",
    )

    # Written only by outreach.mailboxes.oauth, under its refresh lease: a save of the whole row
    # elsewhere (an API PATCH) must not put back tokens it read before a refresh.
    OAUTH_TOKEN_FIELDS = (
        "oauth_refresh_token",
        "oauth_access_token",
        "oauth_access_token_expires_at",
        "oauth_refreshing_until",
    )

    class Meta:
        verbose_name = "SMTP credential"
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
        return self.auth_method in (self.AuthMethod.OAUTH_GOOGLE, self.AuthMethod.OAUTH_MICROSOFT)

    @property
    def is_simulator(self) -> bool:
        return self.auth_method == self.AuthMethod.SIMULATOR

    @property
    def logs_in(self) -> bool:
        """Whether the mailbox logs in to its SMTP server (OAuth, or a username and password)."""
        return self.uses_oauth or bool(self.smtp_username and self.smtp_password)

    @property
    def is_paced(self) -> bool:
        return self.max_interval_seconds > 0


class OAuthAuthorization(models.Model):
    """One started `POST /smtp_credentials/oauth`, bound to the account. Its connect page
    names the account; the click there (`continued_at`) makes the single-use `state`
    sent to the provider, the PKCE code verifier and the OpenID nonce the callback
    needs. The state itself is not stored, only its SHA-256, so a database read does
    not yield a usable callback."""

    class Provider(models.TextChoices):
        GOOGLE = "google"
        MICROSOFT = "microsoft"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    provider = models.CharField(max_length=10, choices=Provider.choices)
    # Null until the connect page's button is pressed.
    state_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    code_verifier = EncryptedTextField(blank=True, default="")
    nonce = models.CharField(max_length=64, blank=True, default="")
    # The mailbox settings given with the request (daily_limit, from_name), applied to
    # the credential the callback creates.
    credential_settings = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    continued_at = models.DateTimeField(null=True, blank=True)  # the connect page's button
    used_at = models.DateTimeField(null=True, blank=True)  # the callback

    class Meta:
        verbose_name = "OAuth authorization"
        indexes = [models.Index(fields=["expires_at"], name="oauth_authorization_expiry_idx")]

    def __str__(self) -> str:
        return f"{self.provider} authorization {self.id}"
