"""Serializers of the webhooks API: webhooks, their deliveries and the event types
(docs/webhooks.md)."""

from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import StrictModelSerializer, StrictSerializer
from webhooks.models import ALL_EVENTS, EVENT_TYPES, OPT_IN_EVENT_TYPES, Webhook, WebhookDelivery
from webhooks.validators import MAX_URL_LENGTH, event_filter_problems, url_problems


class WebhookSerializer(StrictModelSerializer):
    event_filters = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Webhook
        fields = ["id", "url", "event_filters", "disabled_at", "consecutive_failures", "created_at"]


class WebhookWithSecretSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="`whsec_...`. Shown only here and by rotate_secret.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class SecretSerializer(StrictSerializer):
    id = serializers.UUIDField()
    secret = serializers.CharField()


class WebhookDeliverySerializer(StrictModelSerializer):
    event_id = serializers.UUIDField(
        source="job_id",
        allow_null=True,
        help_text="The envelope `id` the attempt carried (null for a test delivery, or "
        "once the delivery was pruned).",
    )

    state = serializers.ChoiceField(
        choices=["pending", "succeeded", "failed"],
        read_only=True,
        help_text="`pending`: a test delivery a worker has not made yet (poll "
        "`GET /webhooks/:id/deliveries/:delivery_id`); `succeeded`: a 2xx came back; "
        "`failed`: anything else (`error` says what).",
    )

    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_type",
            "attempt",
            "state",
            "status_code",
            "error",
            "delivered_at",
            "created_at",
            "duration_ms",
            "test",
            "event_id",
        ]


class WebhookEventTypeSerializer(StrictSerializer):
    type = serializers.CharField()
    description = serializers.CharField()
    opt_in = serializers.BooleanField(
        help_text="Delivered only to webhooks whose event_filters name it (`*` does not cover it)."
    )
    schema = serializers.DictField(help_text="JSON Schema (2020-12) of the event's `data`.")


class WebhookTestRequest(StrictSerializer):
    type = serializers.ChoiceField(
        choices=list(EVENT_TYPES + OPT_IN_EVENT_TYPES),
        help_text="The event type whose example is sent.",
    )


class WebhookReplayRequest(StrictSerializer):
    since = TimestampField(
        help_text="Deliveries that ended failed at or after this time are delivered again."
    )


class WebhookReplayResponse(StrictSerializer):
    replayed = serializers.IntegerField(help_text="How many deliveries were queued again.")
    has_more = serializers.BooleanField(
        help_text="More remain than one call replays: call again with the same `since`."
    )


class RedeliveryResponse(StrictSerializer):
    event_id = serializers.UUIDField(help_text="The envelope `id`, the same as before.")
    state = serializers.CharField(help_text="`pending`: its first new attempt is due now.")


class _WebhookFieldsInput(StrictSerializer):
    url = serializers.CharField(max_length=MAX_URL_LENGTH, trim_whitespace=False)
    event_filters = serializers.ListField(
        child=serializers.CharField(), help_text=f'Event types, or ["{ALL_EVENTS}"] for all.'
    )

    def validate_url(self, value: str) -> str:
        problems = url_problems(value)
        if problems:
            raise serializers.ValidationError(problems)
        return value

    def validate_event_filters(self, value: list[str]) -> list[str]:
        problems = event_filter_problems(value)
        if problems:
            raise serializers.ValidationError(problems)
        return value


class WebhookCreateInput(_WebhookFieldsInput):
    event_filters = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=lambda: [ALL_EVENTS],
        help_text=f'Event types, or ["{ALL_EVENTS}"] for all (the default).',
    )


class WebhookUpdateInput(_WebhookFieldsInput):
    # A webhook as GET /webhooks/:id shows it may be sent back whole.
    echo_fields = ("id", "consecutive_failures", "created_at")

    url = serializers.CharField(max_length=MAX_URL_LENGTH, trim_whitespace=False, required=False)
    event_filters = serializers.ListField(child=serializers.CharField(), required=False)
    disabled_at = TimestampField(
        allow_null=True,
        required=False,
        help_text="null re-enables (and resets consecutive_failures); a timestamp disables, "
        "recording the server's current time.",
    )


class WebhookCreateRequest(StrictSerializer):
    webhook = WebhookCreateInput()


class WebhookUpdateRequest(StrictSerializer):
    webhook = WebhookUpdateInput()
