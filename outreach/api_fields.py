"""Serializer fields shared by the outreach API resources."""

from rest_framework import serializers

from outreach.emails import InvalidEmail, email_clean
from outreach.timezones import timezone_errors


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


def email_value_validate(value: str) -> str:
    try:
        return email_clean(value)
    except InvalidEmail as exc:
        raise serializers.ValidationError(str(exc)) from None
