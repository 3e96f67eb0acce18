"""HTTP API of the outreach resources (API.md section 2): thin views over services."""

import json
from types import SimpleNamespace
from uuid import UUID

from django.conf import settings
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import (
    OpenApiParameter,
    extend_schema,
    extend_schema_field,
    inline_serializer,
)
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.errors import (
    CampaignNotFound,
    ContactImportNotFound,
    ContactNotFound,
    CredentialNotFound,
    EnrollmentNotActive,
    EnrollmentNotFound,
    ValidationFailed,
)
from config.api.fields import StrictBooleanField, TimestampField
from config.api.pagination import StartingAfterPagination
from config.api.parsers import RowsJSONParser
from config.api.serializers import RepresentationMixin
from config.api.viewsets import AccountScopedAPIView, AccountScopedViewSet
from config.outbound import host_normalize, host_refusal
from outreach import enrollments, selectors, services, stopping
from outreach import oauth as oauth_flow
from outreach.contact_data import (
    InvalidContactData,
    contact_data_clean,
    fields_errors,
    timezone_errors,
)
from outreach.emails import InvalidEmail, email_clean
from outreach.enrollments import STAT_NAMES
from outreach.mailbox_check import credential_verify
from outreach.models import (
    MAX_INTERVAL_SECONDS,
    Campaign,
    Contact,
    ContactImport,
    Enrollment,
    OAuthAuthorization,
    Security,
    SmtpCredential,
)
from outreach.rendering import template_errors
from outreach.sending_status import UPCOMING_MAX, sending_status
from outreach.variants import MAX_EXTRA_VARIANTS, step_content, step_letters
from outreach.windows import send_window_errors, timezone_valid

MAX_STEPS = 20
MAX_DISPATCH_IDS = 10_000
DEFAULT_PORTS = {"smtp": {"starttls": 587, "ssl": 465, "none": 25}, "imap": {"ssl": 993}}


class BlankAsNullChoiceField(serializers.ChoiceField):
    """A choice stored as "" when absent, shown and accepted as null."""

    def __init__(self, **kwargs):
        super().__init__(allow_null=True, **kwargs)

    def to_representation(self, value):
        return value or None

    def to_internal_value(self, data):
        return "" if data is None else super().to_internal_value(data)

    def validate_empty_values(self, data):
        # DRF returns None for a null without calling to_internal_value; the column
        # stores "" for "none".
        if data is None and not self.read_only:
            return (True, "")
        return super().validate_empty_values(data)


class TimezoneNameField(serializers.CharField):
    """An optional IANA time zone name; null or "" for none (stored as "")."""

    def __init__(self, **kwargs):
        super().__init__(required=False, allow_blank=True, allow_null=True, max_length=64, **kwargs)

    def to_representation(self, value):
        return value or None

    def validate_empty_values(self, data):
        if data is None and not self.read_only:
            return (True, "")
        return super().validate_empty_values(data)

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        problem = timezone_errors(value)
        if problem:
            raise serializers.ValidationError(problem)
        return value.strip()


def _validate_email_value(value: str) -> str:
    try:
        return email_clean(value)
    except InvalidEmail as exc:
        raise serializers.ValidationError(str(exc)) from None


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
    """A mailbox server the outbound guard lets the service reach (API.md section 11)."""
    try:
        host = host_normalize(value)
    except ValueError as exc:
        raise serializers.ValidationError(str(exc)) from None
    refusal = host_refusal(host, port)
    if refusal:
        raise serializers.ValidationError(refusal)
    return host


def pace_errors(attrs: dict, credential: SmtpCredential | None) -> dict:
    """The pace pair checked: min_interval_seconds at most max_interval_seconds, each from
    the request or else the mailbox (or the defaults). The error is named after the field
    the request changed (min when it changed both)."""
    low, high = (
        attrs.get(name, getattr(credential or SmtpCredential(), name))
        for name in ("min_interval_seconds", "max_interval_seconds")
    )
    if low <= high:
        return {}
    field = "min_interval_seconds" if "min_interval_seconds" in attrs else "max_interval_seconds"
    return {field: [f"min_interval_seconds ({low}) must not exceed max_interval_seconds ({high})."]}


class CredentialSerializer(serializers.ModelSerializer):
    from_email = serializers.CharField(max_length=254)
    smtp_port = serializers.IntegerField(min_value=1, max_value=65535, required=False)
    smtp_password = _secret_field(1000)
    imap_port = serializers.IntegerField(
        min_value=1, max_value=65535, required=False, allow_null=True
    )
    imap_password = _secret_field(1000)
    relay_provider = BlankAsNullChoiceField(
        choices=SmtpCredential.RelayProvider.choices, required=False
    )
    relay_signing_key = _secret_field(10_000)
    relay_webhook_url = serializers.SerializerMethodField()
    daily_limit = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False)
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
    smtp_password_set = serializers.SerializerMethodField()
    imap_password_set = serializers.SerializerMethodField()
    relay_signing_key_set = serializers.SerializerMethodField()
    last_error = serializers.SerializerMethodField()
    imap_last_error = serializers.SerializerMethodField()
    auth_method = serializers.ChoiceField(
        choices=SmtpCredential.AuthMethod.choices,
        read_only=True,
        help_text="How SMTP and IMAP log in: `password`, or OAuth 2.0 (XOAUTH2) for mailboxes "
        "connected with POST /smtp_credentials/oauth.",
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
            "from_email",
            "from_name",
            "smtp_host",
            "smtp_port",
            "smtp_username",
            "smtp_password",
            "smtp_password_set",
            "smtp_security",
            "imap_host",
            "imap_port",
            "imap_username",
            "imap_password",
            "imap_password_set",
            "imap_security",
            "daily_limit",
            "min_interval_seconds",
            "max_interval_seconds",
            "next_send_earliest_at",
            "relay_provider",
            "relay_signing_key",
            "relay_signing_key_set",
            "relay_webhook_url",
            "disabled_at",
            "disabled_reason",
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
        return _validate_email_value(value)

    def validate_smtp_host(self, value):
        return _mailbox_host(value, 25)

    def validate_imap_host(self, value):
        return _mailbox_host(value, 993) if value else value

    def validate(self, attrs):
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
        if errors:
            raise serializers.ValidationError(errors)
        return attrs


class MailboxCheckSerializer(serializers.Serializer):
    ok = serializers.BooleanField()
    error = serializers.CharField(allow_null=True, help_text="Why it failed; null when ok.")


class MailboxVerificationSerializer(serializers.Serializer):
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


class OAuthStartSerializer(serializers.Serializer):
    provider = serializers.ChoiceField(choices=OAuthAuthorization.Provider.choices)
    daily_limit = serializers.IntegerField(min_value=0, max_value=1_000_000, required=False)
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


class OAuthStartedSerializer(serializers.Serializer):
    authorization_url = serializers.URLField(
        help_text="The provider's consent page: open it in the mailbox owner's browser."
    )
    expires_at = TimestampField(help_text="The link works once, until then (15 minutes).")


class CredentialViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    """Mailboxes the account sends from. Passwords and signing keys are write-only."""

    queryset = SmtpCredential.objects.all()
    serializer_class = CredentialSerializer
    not_found_error = CredentialNotFound
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self):
        return super().get_queryset().order_by("-created_at", "-pk")

    @extend_schema(responses={201: CredentialCreatedSerializer})
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        credential = services.credential_create(
            account=request.user, data=serializer.validated_data
        )
        body = self.get_serializer(credential).data
        body["verification"] = credential_verify(credential=credential)
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=OAuthStartSerializer,
        responses={201: OAuthStartedSerializer},
        summary="Connect a Google or Microsoft mailbox (OAuth 2.0)",
        description="Starts the provider's authorization code flow (PKCE, offline access, the "
        "mail scopes). Send the mailbox's owner to `authorization_url`; after consent the "
        "provider returns to `GET /oauth/callback/<provider>`, which creates the credential "
        "(SMTP and IMAP hosts preset, `auth_method` `oauth_google` / `oauth_microsoft`), or "
        "re-authorizes the account's mailbox with that address. 422 `oauth_not_configured` "
        "when the service has no OAuth client for the provider.",
    )
    @action(detail=False, methods=["post"], url_path="oauth")
    def oauth(self, request):
        serializer = OAuthStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        url, expires_at = oauth_flow.authorization_start(
            account=request.user, provider_name=data.pop("provider"), credential_settings=data
        )
        body = OAuthStartedSerializer({"authorization_url": url, "expires_at": expires_at}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses=MailboxVerificationSerializer,
        summary="Check the mailbox now",
        description="Connects and logs in to the SMTP server, and to the IMAP server when "
        "imap_host is set, as sending and reply polling do. Sends nothing, changes nothing. "
        "Answers within MAILBOX_VERIFY_TIMEOUT_SECONDS (15 s by default).",
    )
    @action(detail=True, methods=["post"])
    def verify(self, request, pk=None):
        return Response(credential_verify(credential=self.get_object()))

    def partial_update(self, request, pk=None):
        credential = self.get_object()
        serializer = self.get_serializer(credential, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        credential = services.credential_update(
            credential=credential, data=serializer.validated_data
        )
        return Response(self.get_serializer(credential).data)


# --- Campaigns -------------------------------------------------------------------------


def _template_validator(*, body: bool):
    """A field validator for a subject (`body` false) or a body part's template."""

    def validate(value: str) -> str:
        problems = template_errors(value, body=body)
        if problems:
            raise serializers.ValidationError(problems)
        return value

    return validate


class StepContentSerializer(serializers.Serializer):
    """A step's subject and bodies: the step's own (variant A) and each of its variants."""

    subject = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=998,
        trim_whitespace=False,
        validators=[_template_validator(body=False)],
    )
    body_text = serializers.CharField(
        trim_whitespace=False, validators=[_template_validator(body=True)]
    )
    body_html = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        default="",
        trim_whitespace=False,
        validators=[_template_validator(body=True)],
    )

    def validate(self, attrs):
        attrs["body_html"] = attrs.get("body_html") or ""
        return attrs


class VariantSerializer(StepContentSerializer):
    variant = serializers.CharField(
        read_only=True, help_text="B, C, ...: the step's own content is variant A."
    )


class StepSerializer(StepContentSerializer):
    delay_minutes = serializers.IntegerField(
        min_value=0, max_value=366 * 24 * 60, required=False, default=0
    )
    variants = serializers.ListField(
        child=VariantSerializer(),
        required=False,
        default=list,
        max_length=MAX_EXTRA_VARIANTS,
        help_text=f"A/B variants besides the step's own content, at most {MAX_EXTRA_VARIANTS}.",
    )

    def to_representation(self, instance):
        return step_representation(instance)


def step_representation(instance) -> dict:
    """A step as the API shows it: a CampaignStep, or any object with its attributes
    (a row of selectors.campaigns_with_relations)."""
    letters = step_letters(instance)
    return {
        "subject": instance.subject,
        "body_text": instance.body_text,
        "body_html": instance.body_html or None,
        "delay_minutes": instance.delay_minutes,
        "variants": [
            {
                "variant": letter,
                "subject": content.subject,
                "body_text": content.body_text,
                "body_html": content.body_html or None,
            }
            for letter in letters[1:]
            for content in [step_content(instance, letter)]
        ],
    }


class StatsSerializer(serializers.Serializer):
    enrolled = serializers.IntegerField()
    sent = serializers.IntegerField()
    opened = serializers.IntegerField()
    replied = serializers.IntegerField()
    bounced = serializers.IntegerField()
    unsubscribed = serializers.IntegerField()
    stopped = serializers.IntegerField()


class VariantStatsSerializer(serializers.Serializer):
    variant = serializers.CharField()
    sent = serializers.IntegerField()
    opened = serializers.IntegerField()
    replied = serializers.IntegerField()
    bounced = serializers.IntegerField()


class StepStatsSerializer(serializers.Serializer):
    position = serializers.IntegerField()
    variants = VariantStatsSerializer(many=True)


class CampaignStatsSerializer(StatsSerializer):
    campaign_id = serializers.UUIDField()
    steps = StepStatsSerializer(many=True)


class CampaignSerializer(RepresentationMixin, serializers.Serializer):
    """A campaign; its representation reuses one set of bound fields (RepresentationMixin):
    a page of campaigns is GET /campaigns's hot path."""

    id = serializers.UUIDField(read_only=True)
    name = serializers.CharField(max_length=200)
    created_at = serializers.DateTimeField(read_only=True)
    status = serializers.CharField(read_only=True)
    paused_reason = BlankAsNullChoiceField(choices=Campaign.PausedReason.choices, read_only=True)
    steps = StepSerializer(many=True, required=False)
    credential_ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=100
    )
    timezone = serializers.CharField(required=False, default="UTC", max_length=64)
    send_window = serializers.JSONField(required=False, allow_null=True, default=None)
    bounce_threshold_percent = serializers.FloatField(
        required=False, default=5.0, min_value=0, max_value=100
    )
    track_opens = StrictBooleanField(required=False, default=True)
    stop_on_reply = StrictBooleanField(required=False, default=True)
    stop_on_domain_reply = StrictBooleanField(required=False, default=False)
    unsubscribe_footer = StrictBooleanField(required=False, default=False)
    send_in_contact_timezone = StrictBooleanField(required=False, default=False)
    stats = serializers.SerializerMethodField()

    @extend_schema_field(StatsSerializer)
    def get_stats(self, obj) -> dict:
        # selectors.campaigns_with_relations; null before anything was counted.
        return obj.stats_json or dict.fromkeys(STAT_NAMES, 0)

    representation_skip = ("steps", "credential_ids")

    def to_representation(self, instance):
        """Steps and mailboxes from the page's own query (selectors.campaigns_with_relations)."""
        data = super().to_representation(instance)
        steps = sorted(instance.step_rows or (), key=lambda step: step["position"])
        data["steps"] = [step_representation(SimpleNamespace(**step)) for step in steps]
        # Newest mailbox first (SmtpCredential's ordering); one database's timestamps sort
        # as their text does.
        credentials = sorted(
            instance.credential_rows or (), key=lambda row: row["created_at"], reverse=True
        )
        data["credential_ids"] = [str(UUID(str(row["id"]))) for row in credentials]
        return data

    def validate_timezone(self, value):
        if not timezone_valid(value):
            raise serializers.ValidationError(
                f"{value!r} is not an IANA time zone name (e.g. Europe/Paris)."
            )
        return value

    def validate_send_window(self, value):
        errors = send_window_errors(value)
        if errors:
            raise serializers.ValidationError(
                {key or "non_field_errors": msgs for key, msgs in errors.items()}
            )
        return value

    def validate_steps(self, steps):
        if len(steps) > MAX_STEPS:
            raise serializers.ValidationError(f"At most {MAX_STEPS} steps.")
        if steps and not steps[0].get("subject", "").strip():
            raise serializers.ValidationError({0: {"subject": ["The first step needs a subject."]}})
        if steps:
            untitled = {
                index: {"subject": ["The first step needs a subject, in every variant."]}
                for index, variant in enumerate(steps[0].get("variants") or [])
                if not variant.get("subject", "").strip()
            }
            if untitled:
                raise serializers.ValidationError({0: {"variants": untitled}})
        instance = self.instance
        if not steps and instance is not None and instance.status != Campaign.Status.DRAFT:
            raise serializers.ValidationError(
                f"A {instance.status} campaign keeps at least one step."
            )
        return steps

    def validate_credential_ids(self, ids):
        owned = selectors.credentials_owned(account=self.context["account"], credential_ids=ids)
        missing = {
            index: ["No such SMTP credential."] for index, cid in enumerate(ids) if cid not in owned
        }
        if missing:
            raise serializers.ValidationError(missing)
        # Keep the given order, drop repeats.
        return list(dict.fromkeys(owned[cid] for cid in ids))

    def validate(self, attrs):
        if "credential_ids" in attrs:
            attrs["credentials"] = attrs.pop("credential_ids")
        return attrs


def _campaign_response(campaign, *, status_code=status.HTTP_200_OK, context=None) -> Response:
    campaign = selectors.campaigns_with_relations(Campaign.objects.filter(pk=campaign.pk)).get()
    return Response(CampaignSerializer(campaign, context=context or {}).data, status=status_code)


class DispatchSerializer(serializers.Serializer):
    contact_ids = serializers.ListField(
        child=serializers.UUIDField(), required=False, max_length=MAX_DISPATCH_IDS
    )
    all_pending = StrictBooleanField(required=False, default=False)

    def validate(self, attrs):
        if attrs.get("all_pending") and "contact_ids" in attrs:
            raise serializers.ValidationError(
                {"all_pending": ["Give either contact_ids or all_pending: true, not both."]}
            )
        if not attrs.get("all_pending") and "contact_ids" not in attrs:
            raise serializers.ValidationError(
                {"contact_ids": ["Give contact_ids, or all_pending: true."]}
            )
        if "contact_ids" in attrs:
            ids = attrs["contact_ids"]
            owned = selectors.contacts_owned(account=self.context["account"], contact_ids=ids)
            missing = {
                index: ["No such contact."] for index, cid in enumerate(ids) if cid not in owned
            }
            if missing:
                raise serializers.ValidationError({"contact_ids": missing})
        return attrs


class EnrollmentSerializer(serializers.ModelSerializer):
    campaign_id = serializers.UUIDField(read_only=True)
    contact_id = serializers.UUIDField(read_only=True)
    contact_email = serializers.EmailField(source="contact.email", read_only=True)
    stop_reason = BlankAsNullChoiceField(choices=Enrollment.StopReason.choices, read_only=True)

    class Meta:
        model = Enrollment
        fields = [
            "id",
            "campaign_id",
            "contact_id",
            "contact_email",
            "status",
            "current_step",
            "next_send_at",
            "sent_at",
            "opened_at",
            "replied_at",
            "bounce_reason",
            "unsubscribed_at",
            "stopped_at",
            "stop_reason",
            "variants",
            "last_error",
            "created_at",
        ]
        read_only_fields = fields


class SendingReasonSerializer(serializers.Serializer):
    code = serializers.ChoiceField(
        choices=[
            "window_closed",
            "paced",
            "daily_limit_reached",
            "mailbox_disabled",
            "reauthorization_required",
            "campaign_paused",
            "campaign_completed",
            "nothing_due",
        ]
    )
    until = TimestampField(allow_null=True, help_text="When it lifts; null when not known.")
    detail = serializers.CharField(allow_null=True)


class SendingMailboxSerializer(serializers.Serializer):
    credential_id = serializers.UUIDField()
    from_email = serializers.CharField()
    can_send_now = serializers.BooleanField()
    reasons = SendingReasonSerializer(many=True)
    next_send_earliest_at = TimestampField(allow_null=True)
    sent_today = serializers.IntegerField()
    daily_limit = serializers.IntegerField()


class UpcomingSendSerializer(serializers.Serializer):
    enrollment_id = serializers.UUIDField()
    contact_email = serializers.CharField()
    step = serializers.IntegerField()
    credential_id = serializers.UUIDField()
    earliest_at = TimestampField()


class SendingStatusSerializer(serializers.Serializer):
    campaign_id = serializers.UUIDField()
    status = serializers.CharField()
    mailboxes = SendingMailboxSerializer(many=True)
    upcoming = UpcomingSendSerializer(many=True)


class CampaignViewSet(
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    queryset = Campaign.objects.all()
    serializer_class = CampaignSerializer
    not_found_error = CampaignNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post", "patch", "delete"]

    # The list's page compiles these annotations once (config.api.pagination).
    page_extend = staticmethod(selectors.campaigns_with_relations)

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = selectors.campaigns_with_relations(queryset)
        return queryset

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "account": self.request.user}

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        data = CampaignSerializer(page, many=True).data
        return self.get_paginated_response(data)

    @idempotent
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        campaign = services.campaign_create(account=request.user, data=serializer.validated_data)
        return _campaign_response(campaign, status_code=status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        campaign = self.get_object()
        serializer = self.get_serializer(campaign, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        campaign = services.campaign_update(campaign=campaign, data=serializer.validated_data)
        return _campaign_response(campaign)

    @extend_schema(
        request=DispatchSerializer,
        responses=inline_serializer(
            "DispatchResult",
            {"campaign_id": serializers.UUIDField(), "dispatched": serializers.IntegerField()},
        ),
    )
    # Not named `dispatch`: that is APIView's request entry point.
    @action(detail=True, methods=["post"], url_path="dispatch", url_name="dispatch")
    def dispatch_enrollments(self, request, pk=None):
        campaign = self.get_object()
        serializer = DispatchSerializer(data=request.data, context={"account": request.user})
        serializer.is_valid(raise_exception=True)
        dispatched = services.campaign_dispatch(
            campaign=campaign, contact_ids=serializer.validated_data.get("contact_ids")
        )
        return Response({"campaign_id": str(campaign.pk), "dispatched": dispatched})

    @extend_schema(request=None, responses=CampaignSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        campaign = services.campaign_pause(campaign=self.get_object())
        return _campaign_response(campaign)

    @extend_schema(request=None, responses=CampaignSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        campaign = services.campaign_resume(campaign=self.get_object())
        return _campaign_response(campaign)

    @extend_schema(
        responses=SendingStatusSerializer,
        summary="Why it is (not) sending",
        description="Per mailbox of the campaign: whether it can send now and, if not, "
        "every reason with the time it lifts; then the next planned sends (at most "
        f"{UPCOMING_MAX}) with the earliest time each may go out. A dry run of the "
        "scheduler: nothing is changed.",
    )
    @action(detail=True, methods=["get"], url_path="sending_status")
    def sending_status(self, request, pk=None):
        campaign = self.get_object()
        answer = sending_status(campaign=campaign, now=timezone.now())
        return Response(SendingStatusSerializer(answer).data)

    @extend_schema(
        responses=EnrollmentSerializer(many=True),
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=[s.value for s in Enrollment.Status])
        ],
    )
    @action(detail=True, methods=["get"])
    def enrollments(self, request, pk=None):
        campaign = self.get_object()
        queryset = Enrollment.objects.filter(campaign=campaign).select_related("contact")
        wanted = request.query_params.get("status")
        if wanted:
            if wanted not in Enrollment.Status.values:
                raise ValidationFailed(
                    {"status": [f"Must be one of {', '.join(Enrollment.Status.values)}."]}
                )
            queryset = queryset.filter(status=wanted)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(EnrollmentSerializer(page, many=True).data)

    @extend_schema(request=None, responses=EnrollmentSerializer)
    @action(
        detail=True,
        methods=["post"],
        url_path=r"enrollments/(?P<enrollment_id>[^/]+)/stop",
        url_name="enrollment-stop",
    )
    def stop_enrollment(self, request, pk=None, enrollment_id=None):
        campaign = self.get_object()
        enrollment = _campaign_enrollment(campaign, enrollment_id)
        if not stopping.enrollment_stop(enrollment_id=enrollment.pk):
            enrollment.refresh_from_db(fields=["status"])
            raise EnrollmentNotActive(
                f"The enrollment has already ended ({enrollment.status}).",
                details={"status": enrollment.status},
            )
        enrollment.refresh_from_db()
        return Response(EnrollmentSerializer(enrollment).data)

    @extend_schema(responses=CampaignStatsSerializer)
    @action(detail=True, methods=["get"])
    def stats(self, request, pk=None):
        campaign = self.get_object()
        body = enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]
        return Response(
            {
                "campaign_id": str(campaign.pk),
                **body,
                "steps": selectors.campaign_step_stats(campaign=campaign),
            }
        )


def _campaign_enrollment(campaign: Campaign, enrollment_id) -> Enrollment:
    """One enrollment of the campaign (already scoped to the caller's account), or 404."""
    try:
        enrollment_id = UUID(str(enrollment_id))
    except ValueError:
        raise EnrollmentNotFound() from None
    enrollment = (
        Enrollment.objects.filter(pk=enrollment_id, campaign=campaign)
        .select_related("contact")
        .first()
    )
    if enrollment is None:
        raise EnrollmentNotFound()
    return enrollment


# --- Contacts --------------------------------------------------------------------------


def _custom_fields_validator(value):
    problem = fields_errors(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class CustomFieldsMixin:
    """Adds the `fields` object. It cannot be a class attribute: Serializer.fields is DRF's."""

    def get_fields(self):
        declared = super().get_fields()
        declared["fields"] = serializers.JSONField(
            required=False, validators=[_custom_fields_validator]
        )
        return declared


class ContactSerializer(CustomFieldsMixin, serializers.ModelSerializer):
    email = serializers.CharField(max_length=254)
    timezone = TimezoneNameField(
        help_text="IANA name (e.g. Asia/Tokyo): campaigns with send_in_contact_timezone "
        "read their send window in it. null: the campaign's time zone."
    )

    class Meta:
        model = Contact
        fields = [
            "id",
            "created_at",
            "email",
            "first_name",
            "last_name",
            "company",
            "fields",
            "timezone",
            "unsubscribed_at",
            "bounced_at",
        ]
        read_only_fields = ["id", "created_at", "unsubscribed_at", "bounced_at"]

    def validate_email(self, value):
        return _validate_email_value(value)


def _bool_param(request, name: str) -> bool | None:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() in ("true", "1"):
        return True
    if raw.lower() in ("false", "0"):
        return False
    raise ValidationFailed({name: ["Must be true or false."]})


class ContactViewSet(
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    queryset = Contact.objects.all()
    serializer_class = ContactSerializer
    not_found_error = ContactNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post", "patch", "delete"]

    @extend_schema(
        parameters=[
            OpenApiParameter("email", OpenApiTypes.STR, description="Exact, case-insensitive."),
            OpenApiParameter("unsubscribed", OpenApiTypes.BOOL),
            OpenApiParameter("bounced", OpenApiTypes.BOOL),
        ]
    )
    def list(self, request):
        queryset = self.get_queryset()
        email = request.query_params.get("email")
        if email:
            queryset = queryset.filter(email_lower=email.strip().lower())
        unsubscribed = _bool_param(request, "unsubscribed")
        if unsubscribed is not None:
            queryset = queryset.filter(unsubscribed_at__isnull=not unsubscribed)
        bounced = _bool_param(request, "bounced")
        if bounced is not None:
            queryset = queryset.filter(bounced_at__isnull=not bounced)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ContactSerializer(page, many=True).data)

    def perform_destroy(self, instance):
        enrollments.contact_delete(contact=instance)

    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        contact = services.contact_create(
            account=request.user, data=contact_data_clean(serializer.validated_data)
        )
        return Response(ContactSerializer(contact).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        contact = self.get_object()
        serializer = self.get_serializer(contact, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        contact = services.contact_update(contact=contact, changes=serializer.validated_data)
        return Response(ContactSerializer(contact).data)


# --- Contact imports -------------------------------------------------------------------


class ContactImportSerializer(serializers.ModelSerializer):
    campaign_id = serializers.UUIDField(read_only=True, allow_null=True)
    failure_reason = serializers.SerializerMethodField()

    class Meta:
        model = ContactImport
        fields = [
            "id",
            "created_at",
            "completed_at",
            "campaign_id",
            "status",
            "source_format",
            "filename",
            "total_rows",
            "processed_rows",
            "created_count",
            "updated_count",
            "skipped_count",
            "errors",
            "failure_reason",
        ]
        read_only_fields = fields

    def get_failure_reason(self, obj) -> str | None:
        return obj.failure_reason or None


def _campaign_id_field():
    return serializers.UUIDField(required=False, allow_null=True)


def _owned_campaign(account, campaign_id, field: str = "campaign_id"):
    if campaign_id is None:
        return None
    campaign = Campaign.objects.filter(account=account, pk=campaign_id).first()
    if campaign is None:
        raise ValidationFailed({field: ["No such campaign."]})
    return campaign


class ContactImportJsonSerializer(serializers.Serializer):
    contacts = serializers.ListField(child=serializers.JSONField(), allow_empty=False)
    campaign_id = _campaign_id_field()


class _FormUUIDField(serializers.UUIDField):
    """DRF drops an empty optional form field as if it were absent; here it is
    validated like any other value (an empty string is not a UUID)."""

    def get_value(self, dictionary):
        return dictionary.get(self.field_name, serializers.empty)


class ContactImportUploadSerializer(serializers.Serializer):
    file = serializers.FileField(
        allow_empty_file=True, help_text="CSV, UTF-8 text, with a header row naming `email`."
    )
    # A form field is a string: an empty one is not "no campaign" (leave it out).
    campaign_id = _FormUUIDField(required=False)

    def validate_file(self, upload):
        head = upload.read()
        upload.seek(0)
        if b"\x00" in head:
            raise serializers.ValidationError("Must be a CSV file: this one holds NUL bytes.")
        try:
            head.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise serializers.ValidationError(
                f"Must be a CSV file in UTF-8 (invalid byte at offset {exc.start}). "
                "Save it as CSV UTF-8."
            ) from None
        return upload


class ContactImportViewSet(
    mixins.RetrieveModelMixin,
    AccountScopedViewSet,
):
    queryset = ContactImport.objects.defer("source_data")
    serializer_class = ContactImportSerializer
    not_found_error = ContactImportNotFound
    pagination_class = StartingAfterPagination
    parser_classes = [RowsJSONParser, MultiPartParser]
    http_method_names = ["get", "post"]

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ContactImportSerializer(page, many=True).data)

    @extend_schema(
        request={
            "application/json": ContactImportJsonSerializer,
            "multipart/form-data": ContactImportUploadSerializer,
        },
        responses={201: ContactImportSerializer},
    )
    @idempotent
    def create(self, request):
        if request.content_type.startswith("multipart/"):
            serializer = ContactImportUploadSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            upload = serializer.validated_data["file"]
            source_format, data, filename = "csv", upload.read(), upload.name or ""
        else:
            serializer = ContactImportJsonSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            source_format = "json"
            data = json.dumps(serializer.validated_data["contacts"]).encode()
            filename = ""
        campaign = _owned_campaign(request.user, serializer.validated_data.get("campaign_id"))
        contact_import = services.contact_import_create(
            account=request.user,
            source_format=source_format,
            data=data,
            campaign=campaign,
            filename=filename,
        )
        return Response(
            ContactImportSerializer(contact_import).data, status=status.HTTP_201_CREATED
        )


# --- Outreaches ------------------------------------------------------------------------


class OutreachContactSerializer(CustomFieldsMixin, serializers.Serializer):
    email = serializers.CharField(max_length=254)
    first_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    last_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    company = serializers.CharField(required=False, allow_blank=True, max_length=200)
    timezone = TimezoneNameField()

    def validate_email(self, value):
        return _validate_email_value(value)


class OutreachSerializer(serializers.Serializer):
    campaign_id = serializers.UUIDField()
    contact = OutreachContactSerializer()


class OutreachView(AccountScopedAPIView):
    """The one-call path: upsert the contact, enroll it, dispatch that enrollment."""

    queryset = Campaign.objects.all()
    not_found_error = CampaignNotFound
    serializer_class = OutreachSerializer

    @extend_schema(
        request=OutreachSerializer,
        responses={201: EnrollmentSerializer, 200: EnrollmentSerializer},
    )
    @idempotent
    def post(self, request):
        serializer = OutreachSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        campaign = _owned_campaign(request.user, serializer.validated_data["campaign_id"])
        try:
            contact = contact_data_clean(serializer.validated_data["contact"])
        except InvalidContactData as exc:  # pragma: no cover - the serializer checked it
            raise ValidationFailed({f"contact.{exc.field_name}": [exc.message]}) from None
        enrollment, changed = services.outreach_create(
            account=request.user, campaign=campaign, contact=contact
        )
        return Response(
            EnrollmentSerializer(enrollment).data,
            status=status.HTTP_201_CREATED if changed else status.HTTP_200_OK,
        )
