"""Serializers of the blocklist API (docs/deliverability.md)."""

from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import QueryFiltersSerializer, StrictModelSerializer, StrictSerializer
from outreach.blocklist import services
from outreach.models.blocklist import BlocklistEntry


class BlocklistEntrySerializer(StrictModelSerializer):
    created_at = TimestampField(read_only=True)
    reason = serializers.SerializerMethodField()

    class Meta:
        model = BlocklistEntry
        fields = ["id", "value", "kind", "created_at", "reason"]

    def get_reason(self, obj) -> str | None:
        return obj.reason or None


class BlocklistAddSerializer(StrictSerializer):
    # Each item is judged on its own: a bad one is listed in `invalid`, the others added.
    entries = serializers.ListField(
        child=serializers.JSONField(),
        allow_empty=False,
        max_length=services.ENTRIES_MAX,
        error_messages={"max_length": f"At most {services.ENTRIES_MAX:,} entries per call."},
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, max_length=200, trim_whitespace=True
    )


class BlocklistInvalidSerializer(StrictSerializer):
    value = serializers.CharField()
    message = serializers.CharField()


class BlocklistAddResultSerializer(StrictSerializer):
    added = serializers.IntegerField()
    existing = serializers.IntegerField()
    invalid = BlocklistInvalidSerializer(many=True)


class BlocklistFiltersSerializer(QueryFiltersSerializer):
    kind = serializers.ChoiceField(choices=BlocklistEntry.Kind.choices, required=False)
    value = serializers.CharField(required=False, max_length=254)
