"""Serializers of the dispatch preview (outreach.campaigns.dispatch_preview)."""

from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import RefusalSerializer, StrictSerializer


class PreviewContactSerializer(StrictSerializer):
    contact_id = serializers.UUIDField()
    email = serializers.CharField()
    timezone = serializers.CharField(help_text="The contact's time zone, or empty.")
    first_send_at = TimestampField(
        allow_null=True, help_text="When step 1 is due; null when the campaign has no steps."
    )


class PreviewSendTimeSerializer(StrictSerializer):
    timezone = serializers.CharField(help_text="The contacts' time zone, or empty.")
    contacts = serializers.IntegerField()
    at = TimestampField(allow_null=True, help_text="Their first send time.")


class PreviewNamedContactSerializer(StrictSerializer):
    contact_id = serializers.UUIDField()
    email = serializers.CharField()


class DispatchPreviewSerializer(StrictSerializer):
    campaign_id = serializers.UUIDField()
    dispatched = serializers.IntegerField(help_text="How many the dispatch would dispatch.")
    first_send_at = TimestampField(allow_null=True, help_text="The earliest first send time.")
    campaign_timezone_first_send_at = TimestampField(
        allow_null=True,
        help_text="The first send time of a contact in the campaign's time zone (one "
        "without a time zone of its own), dispatched now; null without steps.",
    )
    send_times = PreviewSendTimeSerializer(many=True)
    contacts = PreviewContactSerializer(many=True)
    has_more = serializers.BooleanField(help_text="More are dispatched than `contacts` names.")
    blocked = PreviewNamedContactSerializer(many=True)
    not_pending = serializers.ListField(child=serializers.UUIDField())
    refusal = RefusalSerializer(allow_null=True)
