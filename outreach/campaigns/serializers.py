"""Serializers of the campaigns API: campaigns, steps, variants, stats, dispatch and the
sending status (an enrollment's: outreach.enrollments.serializers)."""

from types import SimpleNamespace
from typing import Any, cast
from uuid import UUID

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictBooleanField, TimestampField
from config.api.serializers import RepresentationMixin, StrictSerializer
from outreach.api_fields import BlankAsNullChoiceField, TimezoneNameField, email_value_validate
from outreach.campaigns.followup_fields import (
    MAX_REPLY_RULES,
    CompleteRuleSerializer,
    ReplyRuleSerializer,
    complete_rule_check,
    reply_rules_check,
)
from outreach.campaigns.step_serializers import (
    StepSerializer,
    steps_representation,
    steps_validate,
)
from outreach.campaigns.windows import send_window_errors
from outreach.contacts import selectors as contacts_selectors
from outreach.contacts.serializers import CustomFieldsMixin
from outreach.enrollments import STAT_NAMES
from outreach.mailboxes import selectors
from outreach.models.campaigns import Campaign
from outreach.timezones import timezone_valid

MAX_DISPATCH_IDS = 10_000


# --- Campaigns -------------------------------------------------------------------------


def _indexed(errors: dict[int, Any]) -> dict[str, Any]:
    """Errors keyed by list index, as DRF takes them (it renders the keys as strings);
    its stubs allow string keys alone."""
    return cast(dict[str, Any], errors)


class StatsSerializer(StrictSerializer):
    enrolled = serializers.IntegerField()
    sent = serializers.IntegerField()
    opened = serializers.IntegerField()
    clicked = serializers.IntegerField()
    replied = serializers.IntegerField()
    bounced = serializers.IntegerField()
    unsubscribed = serializers.IntegerField()
    stopped = serializers.IntegerField()


class VariantStatsSerializer(StrictSerializer):
    variant = serializers.CharField()
    sent = serializers.IntegerField()
    opened = serializers.IntegerField()
    clicked = serializers.IntegerField()
    replied = serializers.IntegerField()
    bounced = serializers.IntegerField()


class StepStatsSerializer(StrictSerializer):
    position = serializers.IntegerField()
    # Null for a position only earlier messages had (the step was removed since).
    key = serializers.CharField(allow_null=True)
    variants = VariantStatsSerializer(many=True)


class BranchStatsSerializer(StrictSerializer):
    key = serializers.CharField()
    waiting = serializers.IntegerField()
    then_count = serializers.IntegerField()
    else_count = serializers.IntegerField()


class CampaignStatsSerializer(StatsSerializer):
    campaign_id = serializers.UUIDField()
    steps = StepStatsSerializer(many=True)
    branches = BranchStatsSerializer(many=True)


class CampaignSerializer(RepresentationMixin, StrictSerializer):
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
    track_clicks = StrictBooleanField(required=False, default=False)
    stop_on_reply = StrictBooleanField(required=False, default=True)
    stop_on_domain_reply = StrictBooleanField(required=False, default=False)
    unsubscribe_footer = StrictBooleanField(required=False, default=False)
    send_in_contact_timezone = StrictBooleanField(required=False, default=False)
    require_authenticated_domain = StrictBooleanField(
        required=False,
        default=False,
        help_text="Hold sends from mailboxes whose From domain check has an error (SPF, "
        "DKIM, DMARC: GET /smtp_credentials/:id/domain_check).",
    )
    # Sends a UTC day per recipient domain (outreach.domain_cap); null: the account's default.
    max_per_recipient_domain_per_day = serializers.IntegerField(
        required=False, allow_null=True, default=None, min_value=1, max_value=100_000
    )
    # Follow-up campaigns (outreach.campaigns.followup_fields).
    on_reply: serializers.ListSerializer = serializers.ListSerializer(
        child=ReplyRuleSerializer(), required=False, max_length=MAX_REPLY_RULES
    )
    on_complete = CompleteRuleSerializer(required=False, allow_null=True)
    stats = serializers.SerializerMethodField()

    @extend_schema_field(StatsSerializer)
    def get_stats(self, obj) -> dict:
        # selectors.campaigns_with_relations; null before anything was counted.
        return obj.stats_json or dict.fromkeys(STAT_NAMES, 0)

    representation_skip = ("steps", "credential_ids")

    def to_representation(self, instance):
        """Steps and mailboxes from the page's own query (selectors.campaigns_with_relations)."""
        data = super().to_representation(instance)
        data["steps"] = steps_representation(
            SimpleNamespace(**step) for step in instance.step_rows or ()
        )
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
        return steps_validate(steps, instance=self.instance)

    def validate_credential_ids(self, ids):
        owned = selectors.credentials_owned(account=self.context["account"], credential_ids=ids)
        missing = {
            index: ["No such SMTP credential."] for index, cid in enumerate(ids) if cid not in owned
        }
        if missing:
            raise serializers.ValidationError(_indexed(missing))
        # Keep the given order, drop repeats.
        return list(dict.fromkeys(owned[cid] for cid in ids))

    def validate_on_reply(self, rules):
        return reply_rules_check(rules, account=self.context["account"], campaign=self.instance)

    def validate_on_complete(self, rule):
        return complete_rule_check(rule, account=self.context["account"], campaign=self.instance)

    def validate(self, attrs):
        if "credential_ids" in attrs:
            attrs["credentials"] = attrs.pop("credential_ids")
        return attrs


class DispatchSerializer(StrictSerializer):
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
            owned = contacts_selectors.contacts_owned(
                account=self.context["account"], contact_ids=ids
            )
            missing = {
                index: ["No such contact."] for index, cid in enumerate(ids) if cid not in owned
            }
            if missing:
                raise serializers.ValidationError({"contact_ids": _indexed(missing)})
        return attrs


class SendingReasonSerializer(StrictSerializer):
    code = serializers.ChoiceField(
        choices=[
            "window_closed",
            "paced",
            "daily_limit_reached",
            "simulator_daily_limit",
            "mailbox_disabled",
            "reauthorization_required",
            "campaign_paused",
            "campaign_completed",
            "nothing_due",
            "domain_unauthenticated",
            "recipient_domain_limit",
            "mailbox_unreachable",
            "provider_paused",
            "complaint_rate",
            "ramping_up",
        ]
    )
    until = TimestampField(allow_null=True, help_text="When it lifts; null when not known.")
    detail = serializers.CharField(allow_null=True)
    since = TimestampField(
        allow_null=True,
        help_text="mailbox_unreachable: when the failure in `detail` was recorded; else null.",
    )
    retry_at = TimestampField(
        allow_null=True,
        help_text="mailbox_unreachable: when the mailbox is next tried (its first planned "
        "send); null when no send waits for it, and for other reasons.",
    )
    provider = serializers.ChoiceField(
        choices=["google", "microsoft", "yahoo", "apple", "other"],
        required=False,
        help_text="Only on provider_paused: the recipient provider the mailbox is paused "
        "toward (the circuit breaker); it still sends to the others.",
    )


class SendingMailboxSerializer(StrictSerializer):
    credential_id = serializers.UUIDField()
    from_email = serializers.CharField()
    can_send_now = serializers.BooleanField()
    reasons = SendingReasonSerializer(many=True)
    next_send_earliest_at = TimestampField(allow_null=True)
    sent_today = serializers.IntegerField()
    daily_limit = serializers.IntegerField()
    domain_check = serializers.JSONField(
        allow_null=True,
        help_text="The mailbox's last From domain check: {domain, status, checked_at, "
        "findings: [{code, level, message}]}; null before its first check.",
    )


class UpcomingSendSerializer(StrictSerializer):
    enrollment_id = serializers.UUIDField()
    contact_email = serializers.CharField()
    step = serializers.IntegerField(
        allow_null=True, help_text="The step's position; null while waiting at a branch."
    )
    key = serializers.CharField(
        help_text="The key of the step it sends, or of the branch it waits at."
    )
    credential_id = serializers.UUIDField(allow_null=True)
    earliest_at = TimestampField(allow_null=True)
    reason = serializers.CharField(
        required=False,
        help_text='Only on an enrollment waiting at a branch: "waiting_on_branch" (no send '
        "is planned until the branch is decided).",
    )
    until = TimestampField(
        required=False, help_text="Only with `reason`: the branch's deadline for this enrollment."
    )
    blocker = SendingReasonSerializer(
        allow_null=True,
        help_text="What holds this send beyond its time: the mailbox_unreachable reason of "
        "its mailbox (the last connection or login failure, its words, retry_at), or null.",
    )


class SendingStatusSerializer(StrictSerializer):
    campaign_id = serializers.UUIDField()
    status = serializers.CharField()
    mailboxes = SendingMailboxSerializer(many=True)
    upcoming = UpcomingSendSerializer(many=True)


# --- Outreaches ------------------------------------------------------------------------


class OutreachContactSerializer(CustomFieldsMixin, StrictSerializer):
    email = serializers.CharField(max_length=254)
    first_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    last_name = serializers.CharField(required=False, allow_blank=True, max_length=200)
    company = serializers.CharField(required=False, allow_blank=True, max_length=200)
    timezone = TimezoneNameField()

    def validate_email(self, value):
        return email_value_validate(value)


class OutreachSerializer(StrictSerializer):
    campaign_id = serializers.UUIDField()
    contact = OutreachContactSerializer()
