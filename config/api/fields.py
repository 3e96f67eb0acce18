"""Serializer fields whose input and output follow the API's conventions exactly,
where DRF's own are lenient."""

from rest_framework import serializers

from config.timestamps import utc_timestamp


class StrictBooleanField(serializers.BooleanField):
    """A JSON boolean: `true` or `false`, not 1, "yes" or "true"."""

    default_error_messages = {"invalid": "Must be true or false (a JSON boolean)."}

    def to_internal_value(self, data):
        if isinstance(data, bool):
            return data
        self.fail("invalid", input=data)


class TimestampField(serializers.DateTimeField):
    """An RFC 3339 timestamp in UTC with microseconds and `Z`
    (`2026-11-21T15:49:36.123456Z`), the year always four digits (strftime's `%Y`
    drops the zeros of a year before 1000)."""

    def to_representation(self, value):
        return utc_timestamp(value)


class StrictCharField(serializers.CharField):
    """A JSON string: not a number or a boolean turned into one."""

    default_error_messages = {"invalid": "Must be a string."}

    def to_internal_value(self, data):
        if not isinstance(data, str):
            self.fail("invalid")
        return super().to_internal_value(data)
