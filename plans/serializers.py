"""Serializers of the plans API (docs/billing.md)."""

from rest_framework import serializers

from config.api.serializers import StrictSerializer


class PlanSerializer(StrictSerializer):
    slug = serializers.CharField()
    name = serializers.CharField()
    tier = serializers.IntegerField()
    monthly_limit = serializers.IntegerField()
    psp_price_id = serializers.CharField(allow_null=True)
