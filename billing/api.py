"""GET /billing/subscription, GET /billing/usage, POST /billing/checkout,
POST /billing/portal and the inbound POST /webhooks/psp."""

import json
import logging

import stripe
from django.conf import settings
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from accounts.idempotency import idempotent
from accounts.selectors import api_request_counts
from billing.checkout import checkout_session_start, portal_session_start
from billing.errors import InvalidSignature
from billing.psp_events import psp_event_handle
from billing.selectors import usage_history
from billing.serializers import (
    CheckoutRequestSerializer,
    SessionUrlSerializer,
    SubscriptionSerializer,
    UsageSerializer,
)
from billing.usage import usage_record_current
from config.api.audit import network_first
from config.api.errors import InvalidJson
from config.api.parsers import JSONParser, json_problems
from config.api.viewsets import ServiceAPIView, no_request_body

logger = logging.getLogger(__name__)


class SubscriptionView(ServiceAPIView):
    """The account's plan (a private plan included: it is the account's own),
    the current period and its sends."""

    @extend_schema(
        summary="The account's plan and current period", responses=SubscriptionSerializer
    )
    def get(self, request):
        account = request.user
        record = usage_record_current(account=account)
        body = {
            "plan": account.plan,
            "current_period": record,
            "psp_subscription_id": account.psp_subscription_id or None,
            "psp_customer_id": account.psp_customer_id or None,
        }
        return Response(SubscriptionSerializer(body).data)


class UsageView(ServiceAPIView):
    """The current period's running total, the 12 records before it, and the
    current period's authenticated requests by the key's client_kind."""

    @extend_schema(
        summary="Usage: current period, history, traffic by client_kind", responses=UsageSerializer
    )
    def get(self, request):
        account = request.user
        record = usage_record_current(account=account)
        body = {
            "monthly_limit": account.plan.monthly_limit,
            "current": record,
            "history": usage_history(account=account, before=record),
            "by_client_kind": api_request_counts(
                account=account, start=record.period_start, end=record.period_end
            ),
        }
        return Response(UsageSerializer(body).data)


class CheckoutView(ServiceAPIView):
    audit_actions = {"post": "billing.checkout"}

    @extend_schema(
        summary="Start a hosted Stripe Checkout for a plan",
        request=CheckoutRequestSerializer,
        responses={200: SessionUrlSerializer},
    )
    @idempotent
    @network_first
    def post(self, request):
        serializer = CheckoutRequestSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        url = checkout_session_start(
            account=request.user,
            plan_slug=serializer.validated_data["plan_slug"],
            client_key=request.headers.get("Idempotency-Key"),
        )
        return Response({"url": url})


class PortalView(ServiceAPIView):
    audit_actions = {"post": "billing.portal"}

    @no_request_body
    @extend_schema(
        summary="Open the hosted Stripe customer portal",
        request=None,
        responses={200: SessionUrlSerializer},
    )
    @idempotent
    @network_first
    def post(self, request):
        url = portal_session_start(
            account=request.user, client_key=request.headers.get("Idempotency-Key")
        )
        return Response({"url": url})


class PspWebhookView(ServiceAPIView):
    """Stripe's notifications. Authenticated by the Stripe-Signature header (the
    shared signing secret), not by an API key: no key authentication, no
    per-key rate limit, no CSRF (DRF's APIView is CSRF-exempt without session
    authentication).

    Not audited: a provider's notification, no actor of the account (docs/audit.md)."""

    audit_actions = {"post": None}

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []
    # Documents the body as JSON; the view reads the raw bytes (what is signed)
    # and never touches request.data.
    parser_classes = [JSONParser]

    @extend_schema(
        summary="Inbound Stripe notifications (Stripe-Signature verified)",
        request=OpenApiTypes.OBJECT,
        responses={
            200: inline_serializer(
                "PspWebhookReceipt",
                {"id": serializers.CharField(), "outcome": serializers.CharField()},
            ),
            400: OpenApiResponse(description="invalid_signature"),
        },
        auth=[],
    )
    @network_first  # Stripe is re-read with no transaction open, no lock held (psp_events)
    def post(self, request):
        payload = request.body
        try:
            stripe.WebhookSignature.verify_header(
                payload,
                request.headers.get("Stripe-Signature"),
                settings.STRIPE_WEBHOOK_SECRET,
                stripe.Webhook.DEFAULT_TOLERANCE,
            )
        except (stripe.SignatureVerificationError, UnicodeDecodeError):
            raise InvalidSignature() from None
        try:
            event = json.loads(payload)
        except (ValueError, RecursionError):
            raise InvalidJson() from None
        if json_problems(event) is not None:
            # Too deep, or a NUL character the payload's jsonb column cannot store.
            raise InvalidJson("The event is nested too deeply or holds a NUL character.")
        if not (
            isinstance(event, dict)
            and isinstance(event.get("id"), str)
            and event["id"]
            and isinstance(event.get("type"), str)
        ):
            raise InvalidJson("The body is not a Stripe event (an object with id and type).")
        outcome = psp_event_handle(event=event)
        return Response({"id": event["id"], "outcome": outcome})
