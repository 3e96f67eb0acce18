"""The query of `GET /analytics` and the representation of its answer (docs/analytics.md)."""

from django.http import QueryDict
from rest_framework import serializers

from config.api.serializers import StrictSerializer
from outreach.analytics.selectors import INTERVALS
from outreach.models.analytics import COUNTERS
from outreach.timezones import timezone_valid

# A range longer than this is refused (API.md 21): `to` - `from`, in days.
MAX_RANGE_DAYS = 365


class AnalyticsQuerySerializer(StrictSerializer):
    """The query string: every parameter optional, any other one refused (422
    validation_failed naming it), as is a malformed value."""

    # `from` is a Python keyword: the field is declared under its name below.
    to = serializers.DateField(required=False, input_formats=["iso-8601"])
    interval = serializers.ChoiceField(choices=INTERVALS, required=False, default="day")
    timezone = serializers.CharField(required=False, default="UTC", max_length=64)
    campaign_id = serializers.UUIDField(required=False)
    credential_id = serializers.UUIDField(required=False)
    step_key = serializers.CharField(required=False, max_length=40)

    def get_fields(self):
        fields = super().get_fields()
        fields["from"] = serializers.DateField(required=False, input_formats=["iso-8601"])
        return fields

    def to_internal_value(self, data):
        # Each parameter's value as given: DRF reads an empty value of a query string
        # (`?to=`) as an absent parameter; here it is a malformed one, refused.
        if isinstance(data, QueryDict):
            data = {name: data.get(name) for name in data}
        return super().to_internal_value(data)

    def validate_timezone(self, value: str) -> str:
        if not timezone_valid(value):
            raise serializers.ValidationError(
                f"{value[:64]!r} is not an IANA time zone name (e.g. Europe/Paris)."
            )
        return value

    def validate(self, attrs):
        if "step_key" in attrs and "campaign_id" not in attrs:
            raise serializers.ValidationError({"step_key": ["Needs campaign_id."]})
        if "credential_id" in attrs and "campaign_id" in attrs:
            raise serializers.ValidationError(
                {"credential_id": ["Give campaign_id or credential_id, not both."]}
            )
        start, end = attrs.get("from"), attrs.get("to")
        if start is not None and end is not None:
            if end < start:
                raise serializers.ValidationError({"to": ["Must not be before from."]})
            if (end - start).days > MAX_RANGE_DAYS:
                raise serializers.ValidationError(
                    {"to": [f"At most {MAX_RANGE_DAYS} days after from."]}
                )
        return attrs


class BouncedSerializer(StrictSerializer):
    hard = serializers.IntegerField()
    soft = serializers.IntegerField()
    block = serializers.IntegerField()


class _Counts(StrictSerializer):
    sent = serializers.IntegerField()
    opened = serializers.IntegerField()
    clicked = serializers.IntegerField()
    replied = serializers.IntegerField()
    positive_replies = serializers.IntegerField()
    bounced = BouncedSerializer()
    unsubscribed = serializers.IntegerField()
    complaints = serializers.IntegerField()
    responses = serializers.IntegerField()


class AnalyticsRowSerializer(_Counts):
    date = serializers.DateField()


class AnalyticsSerializer(StrictSerializer):
    interval = serializers.ChoiceField(choices=INTERVALS)
    timezone = serializers.CharField()
    series = AnalyticsRowSerializer(many=True)
    totals = _Counts()


# Where each field of the answer reads its value in a row of counters (COUNTERS' order):
# an index, or for `bounced` the index of each type. Worked out once: a year's series
# shows 366 rows.
_INDEX = {name: i for i, name in enumerate(COUNTERS)}
_BOUNCED = tuple((kind, _INDEX[f"bounced_{kind}"]) for kind in ("hard", "soft", "block"))
_SHOWN = tuple((name, _INDEX.get(name)) for name in _Counts._declared_fields)


def counts_shown(values) -> dict:
    """Counters (a sequence in COUNTERS' order) as the API shows them: the bounces
    nested by type."""
    return {
        name: values[i] if i is not None else {kind: values[j] for kind, j in _BOUNCED}
        for name, i in _SHOWN
    }
