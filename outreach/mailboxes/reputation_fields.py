"""The mailbox API's fields of its reputation (docs/deliverability.md): its ramp-up, the
complaint guard's pause and the circuit breaker's pauses in force."""

from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import StrictSerializer
from outreach.models.reputation import RecipientProvider, ThrottleReason


class RampUpSerializer(StrictSerializer):
    start_per_day = serializers.IntegerField(
        min_value=1, help_text="The daily limit on the day of its first send."
    )
    increase_per_day = serializers.IntegerField(
        min_value=1, help_text="Added to it for each UTC day after that one."
    )

    def validate(self, attrs):
        # Both, even inside a PATCH (whose partial reaches nested serializers): a ramp is
        # replaced whole, never half-written.
        missing = {
            str(name): ["This field is required."] for name in self.fields if name not in attrs
        }
        if missing:
            raise serializers.ValidationError(missing)
        return attrs


RESUME_ONLY = (
    "Only null: PATCH {paused_at: null} resumes a mailbox the complaint guard paused "
    "(disabled_at disables one by hand)."
)


class ProviderPauseSerializer(StrictSerializer):
    provider = serializers.ChoiceField(choices=RecipientProvider.choices)
    until = TimestampField()
    reason = serializers.ChoiceField(choices=ThrottleReason.choices)
    detail = serializers.CharField(help_text="The server's words on the strike that paused it.")
