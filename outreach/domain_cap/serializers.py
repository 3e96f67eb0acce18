"""Serializers of the account's sending defaults (docs/deliverability.md)."""

from rest_framework import serializers

from config.api.serializers import StrictSerializer

# The highest cap accepted (a day's sends to one domain), on campaigns and accounts.
CAP_MAX = 100_000


def cap_field() -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=CAP_MAX)


class SendingDefaultsSerializer(StrictSerializer):
    max_per_recipient_domain_per_day = cap_field()
