"""Serializers of the mailboxes API (SMTP credentials), with the checks of their
settings (docs/outreach.md)."""

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import StrictModelSerializer, StrictSerializer
from config.outbound import host_normalize, host_refusal
from outreach.api_fields import BlankAsNullChoiceField, email_value_validate
from outreach.mailboxes.pace import pace_errors
from outreach.mailboxes.reputation_fields import (
    RESUME_ONLY,
    ProviderPauseSerializer,
    RampUpSerializer,
)
from outreach.models.mailboxes import (
    MAX_INTERVAL_SECONDS,
    OAuthAuthorization,
    Security,
    SmtpCredential,
)

DEFAULT_PORTS = {"smtp": {"starttls": 587, "ssl": 465, "none": 25}, "imap": {"ssl": 993}}


def _secret_field(max_length: int) -> serializers.CharField:
    return serializers.CharField(
        write_only=True,
        required=False,
        allow_blank=True,
        max_length=max_length,
        trim_whitespace=False,
        style={"input_type": "password"},
    )


# --- SMTP credentials ------------------------------------------------------------------


def _mailbox_host(value: str, port: int) -> str:
    """A mailbox server the outbound guard lets the service reach (docs/outbound.md)."""
    try:
        host = host_normalize(value)
    except ValueError as exc:
        raise serializers.ValidationError(str(exc)) from None
    refusal = host_refusal(host, port)
    if refusal:
        raise serializers.ValidationError(refusal)
    return host


DAILY_LIMIT_HELP = (
    "Most sends from this mailbox per UTC day, 0 to the service's DAILY_LIMIT_MAX (2,000 by "
    "default). 0 parks the mailbox."
)


def daily_limit_validate(value: int) -> None:
    """At most DAILY_LIMIT_MAX, read per request (operators set it; tests change it)."""
    if value > settings.DAILY_LIMIT_MAX:
        raise serializers.ValidationError(
            f"Ensure this value is less than or equal to {settings.DAILY_LIMIT_MAX}."
        )


LOGIN_REQUIRED = (
    "A login is required: set smtp_username and smtp_password, or connect a Google or "
    "Microsoft mailbox with POST /smtp_credentials/oauth (this service sets "
    "SMTP_REQUIRE_LOGIN)."
)


def login_errors(attrs: dict, credential: SmtpCredential | None) -> dict:
    """With SMTP_REQUIRE_LOGIN, a password mailbox that may send (every new one, and an
    enabled one after the update) needs its SMTP username and password. A disabled mailbox
    sends nothing, so a mailbox stored without a login can still be disabled or edited
    while disabled; to enable it again, give it a login."""
    if not settings.SMTP_REQUIRE_LOGIN or (
        credential is not None and (credential.uses_oauth or credential.is_simulator)
    ):
        return {}
    if credential is not None and attrs.get("disabled_at", credential.disabled_at) is not None:
        return {}
    errors = {}
    for field in ("smtp_username", "smtp_password"):
        if not attrs.get(field, getattr(credential, field, "")):
            errors[field] = [LOGIN_REQUIRED]
    return errors


# The read-only fields a credential shows right after one of its settings.
_SHOWN_AFTER = {
    "smtp_password": ("smtp_password_set",),
    "imap_password": ("imap_password_set",),
    "max_interval_seconds": ("next_send_earliest_at",),
    "relay_signing_key": ("relay_signing_key_set", "relay_webhook_url"),
}


class CredentialSerializer(StrictModelSerializer):
    from_email = serializers.CharField(max_length=254)
    smtp_port = serializers.IntegerField(min_value=1, max_value=65535, required=False)
    smtp_password = _secret_field(1000)
    imap_port = serializers.IntegerField(
        min_value=1, max_value=65535, required=False, allow_null=True
    )
    imap_password = _secret_field(1000)
    imap_authserv_id = serializers.RegexField(
        r"^[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?$",
        max_length=255,
        required=False,
        allow_blank=True,
        help_text="The authserv-id the mailbox server writes in its own Authentication-Results "
        "header (e.g. `mx.google.com`; a parent domain names its hosts: `messagingengine.com`). "
        "Set, a reply matched by its From alone counts only when the topmost "
        "Authentication-Results header names it. Empty: the topmost header, whatever it names "
        "(docs/intake.md).",
        error_messages={"invalid": "A host name, such as mx.google.com."},
    )
    relay_provider = BlankAsNullChoiceField(
        choices=SmtpCredential.RelayProvider.choices, required=False
    )
    relay_signing_key = _secret_field(10_000)
    relay_webhook_url = serializers.SerializerMethodField()
    daily_limit = serializers.IntegerField(
        min_value=0, required=False, validators=[daily_limit_validate], help_text=DAILY_LIMIT_HELP
    )
    min_interval_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_INTERVAL_SECONDS, required=False
    )
    max_interval_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_INTERVAL_SECONDS, required=False
    )
    next_send_earliest_at = TimestampField(read_only=True, allow_null=True)
    disabled_at = TimestampField(required=False, allow_null=True)
    disabled_reason = BlankAsNullChoiceField(
        choices=SmtpCredential.DisabledReason.choices, read_only=True
    )
    ramp_up = RampUpSerializer(
        required=False,
        allow_null=True,
        help_text="Ramp-up of a new mailbox: its effective daily limit is min(daily_limit, "
        "start_per_day + increase_per_day × n), n the UTC days since its first send after "
        "ramp_up was set. Null: none (docs/deliverability.md).",
    )
    paused_at = TimestampField(
        required=False,
        allow_null=True,
        help_text="Set by the complaint guard (paused_reason `complaint_rate`): the mailbox "
        "sends nothing until PATCH {paused_at: null}.",
    )
    paused_reason = BlankAsNullChoiceField(
        choices=SmtpCredential.PausedReason.choices, read_only=True
    )
    provider_pauses = serializers.SerializerMethodField(
        help_text="The circuit breaker's pauses in force: toward these recipient providers "
        "the mailbox sends nothing until `until`."
    )
    smtp_password_set = serializers.SerializerMethodField()
    imap_password_set = serializers.SerializerMethodField()
    relay_signing_key_set = serializers.SerializerMethodField()
    last_error = serializers.SerializerMethodField()
    imap_last_error = serializers.SerializerMethodField()
    auth_method = serializers.ChoiceField(
        choices=SmtpCredential.AuthMethod.choices,
        read_only=True,
        help_text="How SMTP and IMAP log in: `password`, or OAuth 2.0 (XOAUTH2) for mailboxes "
        "connected with POST /smtp_credentials/oauth; `simulator` for a simulated mailbox "
        "(POST /smtp_credentials/simulator), which never connects.",
    )
    oauth_status = BlankAsNullChoiceField(
        choices=SmtpCredential.OAuthStatus.choices,
        read_only=True,
        help_text="OAuth mailboxes: `connected`, or `reauthorization_required` when the "
        "provider refused its refresh token (sends wait; connect it again). Null for "
        "password mailboxes.",
    )

    class Meta:
        model = SmtpCredential
        fields = [
            "id",
            "created_at",
            *(
                name
                for field in SmtpCredential.WRITABLE_FIELDS
                for name in (field, *_SHOWN_AFTER.get(field, ()))
            ),
            "disabled_at",
            "disabled_reason",
            "paused_at",
            "paused_reason",
            "provider_pauses",
            "sent_count",
            "bounced_count",
            "last_error",
            "last_error_at",
            "imap_last_polled_at",
            "imap_last_error",
            "imap_last_error_at",
            "auth_method",
            "oauth_status",
        ]
        read_only_fields = [
            "id",
            "created_at",
            "sent_count",
            "bounced_count",
            "last_error_at",
            "imap_last_polled_at",
            "imap_last_error_at",
        ]

    def get_relay_webhook_url(self, obj) -> str:
        return f"{settings.BASE_URL}/inbound/relay/{obj.pk}"

    @extend_schema_field(ProviderPauseSerializer(many=True))
    def get_provider_pauses(self, obj) -> list[dict]:
        now = timezone.now()
        return [
            {"provider": p.provider, "until": p.until, "reason": p.reason, "detail": p.detail}
            for p in sorted(obj.provider_pauses.all(), key=lambda p: p.provider)
            if p.until > now
        ]

    def validate_paused_at(self, value):
        if value is not None:
            raise serializers.ValidationError(RESUME_ONLY)
        return value

    def get_smtp_password_set(self, obj) -> bool:
        return bool(obj.smtp_password)

    def get_imap_password_set(self, obj) -> bool:
        return bool(obj.imap_password)

    def get_relay_signing_key_set(self, obj) -> bool:
        return bool(obj.relay_signing_key)

    def get_last_error(self, obj) -> str | None:
        return obj.last_error or None

    def get_imap_last_error(self, obj) -> str | None:
        return obj.imap_last_error or None

    def validate_from_email(self, value):
        return email_value_validate(value)

    def validate_smtp_host(self, value):
        return _mailbox_host(value, 25)

    def validate_imap_authserv_id(self, value):
        return value.lower()

    def validate_imap_host(self, value):
        return _mailbox_host(value, 993) if value else value

    def validate(self, attrs):
        if self.instance is not None and self.instance.is_simulator and simulator_errors(attrs):
            raise serializers.ValidationError(simulator_errors(attrs))
        creating = self.instance is None
        errors: dict[str, list[str]] = {}
        security = attrs.get(
            "smtp_security", self.instance.smtp_security if self.instance else Security.STARTTLS
        )
        if creating and "smtp_port" not in attrs:
            attrs["smtp_port"] = DEFAULT_PORTS["smtp"][security]
        imap_host = attrs.get("imap_host", self.instance.imap_host if self.instance else "")
        if imap_host:
            imap_security = attrs.get(
                "imap_security", self.instance.imap_security if self.instance else Security.SSL
            )
            if not (
                attrs.get("imap_port") or (self.instance is not None and self.instance.imap_port)
            ):
                attrs["imap_port"] = DEFAULT_PORTS["imap"].get(imap_security, 143)
            if not attrs.get("imap_username", getattr(self.instance, "imap_username", "")):
                errors["imap_username"] = ["Required when imap_host is set."]
            oauth = self.instance is not None and self.instance.uses_oauth
            if not oauth and not attrs.get(
                "imap_password", getattr(self.instance, "imap_password", "")
            ):
                errors["imap_password"] = ["Required when imap_host is set."]
        provider = attrs.get("relay_provider", getattr(self.instance, "relay_provider", ""))
        if provider and not attrs.get(
            "relay_signing_key", getattr(self.instance, "relay_signing_key", "")
        ):
            errors["relay_signing_key"] = ["Required when relay_provider is set."]
        errors.update(pace_errors(attrs, self.instance))
        errors.update(login_errors(attrs, self.instance))
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


# --- simulator mailboxes ---------------------------------------------------------------

# What a simulator mailbox has none of: it never connects (docs/sandbox.md).
SIMULATOR_NO_SERVER = "A simulator mailbox has no server: it never connects."
_SERVER_FIELDS = [
    name for name in SmtpCredential.WRITABLE_FIELDS if name.startswith(("smtp_", "imap_", "relay_"))
]


def simulator_errors(attrs: dict) -> dict:
    """A change of a simulator mailbox may not give it a server, a login or a relay."""
    return {name: [SIMULATOR_NO_SERVER] for name in _SERVER_FIELDS if name in attrs}


class SimulatorCreateSerializer(StrictSerializer):
    from_email = serializers.CharField(max_length=254)
    from_name = serializers.CharField(max_length=200, required=False, allow_blank=True)
    daily_limit = serializers.IntegerField(
        min_value=0, required=False, validators=[daily_limit_validate], help_text=DAILY_LIMIT_HELP
    )
    min_interval_seconds = serializers.IntegerField(
        min_value=0,
        max_value=MAX_INTERVAL_SECONDS,
        required=False,
        help_text="Pace, as any mailbox's. A simulator sends unpaced (0 / 0) unless given one.",
    )
    max_interval_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_INTERVAL_SECONDS, required=False
    )

    def validate_from_email(self, value):
        return email_value_validate(value)

    def validate(self, attrs):
        attrs.setdefault("min_interval_seconds", 0)
        attrs.setdefault("max_interval_seconds", attrs["min_interval_seconds"])
        errors = pace_errors(attrs, None)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MailboxCheckSerializer(StrictSerializer):
    ok = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="Why it failed; null when ok.")


class MailboxVerificationSerializer(StrictSerializer):
    smtp = MailboxCheckSerializer(help_text="Connect and log in to the SMTP server.")
    imap = MailboxCheckSerializer(
        allow_null=True,
        help_text="Connect and log in to the IMAP server; null when the mailbox has no imap_host.",
    )


class CredentialCreatedSerializer(CredentialSerializer):
    verification = MailboxVerificationSerializer(
        read_only=True,
        help_text="The check of POST /smtp_credentials/:id/verify, run at creation. The "
        "mailbox is created whatever its result.",
    )

    class Meta(CredentialSerializer.Meta):
        fields = [*CredentialSerializer.Meta.fields, "verification"]


class OAuthStartSerializer(StrictSerializer):
    provider = serializers.ChoiceField(choices=OAuthAuthorization.Provider.choices)
    daily_limit = serializers.IntegerField(
        min_value=0, required=False, validators=[daily_limit_validate], help_text=DAILY_LIMIT_HELP
    )
    min_interval_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_INTERVAL_SECONDS, required=False
    )
    max_interval_seconds = serializers.IntegerField(
        min_value=0, max_value=MAX_INTERVAL_SECONDS, required=False
    )
    from_name = serializers.CharField(max_length=200, required=False, allow_blank=True)

    def validate(self, attrs):
        errors = pace_errors(attrs, None)
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class OAuthStartedSerializer(StrictSerializer):
    authorization_url = serializers.URLField(
        help_text="The service's connect page (`/oauth/connect/<token>`): open it in the "
        "mailbox owner's browser. It names this account and leads on to the provider's "
        "consent page when the owner presses its button."
    )
    expires_at = TimestampField(help_text="The link works once, until then (15 minutes).")
