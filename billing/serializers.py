"""Serializers of the billing API: subscription, usage, checkout and portal
(docs/billing.md)."""

from rest_framework import serializers

from config.api.serializers import StrictSerializer
from plans.serializers import PlanSerializer


# The account's plan as GET /billing/subscription shows it: the plans API's plan, its
# fields defined there once, less psp_price_id, which the subscription's plan has never
# shown. A comment, not a docstring: drf-spectacular would make a docstring the OpenAPI
# component's description (StrictSerializer's, as for Plan).
class PlanSummarySerializer(PlanSerializer):
    # DRF's way to leave an inherited field out; the stubs type the name as the field.
    psp_price_id = None  # type: ignore[assignment]


class CurrentPeriodSerializer(StrictSerializer):
    start = serializers.DateTimeField(source="period_start")
    end = serializers.DateTimeField(source="period_end")
    sends_count = serializers.IntegerField()


class SubscriptionSerializer(StrictSerializer):
    plan = PlanSummarySerializer()
    current_period = CurrentPeriodSerializer()
    psp_subscription_id = serializers.CharField(allow_null=True)
    psp_customer_id = serializers.CharField(allow_null=True)


class UsageRecordSerializer(StrictSerializer):
    period_start = serializers.DateTimeField()
    period_end = serializers.DateTimeField()
    sends_count = serializers.IntegerField()


class ClientKindCountsSerializer(StrictSerializer):
    direct = serializers.IntegerField()
    mcp = serializers.IntegerField()
    sdk = serializers.IntegerField()


class UsageSerializer(StrictSerializer):
    monthly_limit = serializers.IntegerField()
    current = UsageRecordSerializer()
    history = UsageRecordSerializer(many=True)
    by_client_kind = ClientKindCountsSerializer()


class CheckoutRequestSerializer(StrictSerializer):
    plan_slug = serializers.CharField(max_length=64)


class SessionUrlSerializer(StrictSerializer):
    url = serializers.URLField()
