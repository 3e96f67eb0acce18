"""/webhooks: thin views over webhooks.services and webhooks.selectors."""

from django.db import transaction
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.audit import audit_now, network_first
from config.api.pagination import parse_limit
from config.api.viewsets import AccountScopedViewSet, ServiceAPIView, no_request_body
from webhooks import operations, selectors, services
from webhooks.catalog import EVENT_CATALOG
from webhooks.errors import WebhookDeliveryNotFound, WebhookNotFound
from webhooks.models import Webhook
from webhooks.serializers import (
    RedeliveryResponse,
    SecretSerializer,
    WebhookCreateRequest,
    WebhookDeliverySerializer,
    WebhookEventTypeSerializer,
    WebhookReplayRequest,
    WebhookReplayResponse,
    WebhookSerializer,
    WebhookTestRequest,
    WebhookUpdateRequest,
    WebhookWithSecretSerializer,
)


class WebhookViewSet(AccountScopedViewSet):
    """Outbound webhook endpoints of the caller's account."""

    queryset = Webhook.objects.all()
    not_found_error = WebhookNotFound

    @extend_schema(summary="List webhooks", responses=WebhookSerializer(many=True))
    def list(self, request):
        webhooks = selectors.webhook_list(self.get_queryset())
        return Response(WebhookSerializer(webhooks, many=True).data)

    @extend_schema(
        summary="Register a webhook",
        request=WebhookCreateRequest,
        responses={201: WebhookWithSecretSerializer},
    )
    @idempotent
    @network_first
    def create(self, request):
        # The URL's host is resolved (the outbound guard's check) with no transaction
        # open; the webhook, its audit row and the answer its Idempotency-Key replays
        # commit in one short transaction (docs/audit.md).
        payload = WebhookCreateRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        with transaction.atomic():
            issued = services.webhook_create(
                account=request.user, **payload.validated_data["webhook"]
            )
            body = WebhookWithSecretSerializer(issued.webhook).data | {"secret": issued.secret}
            response = Response(body, status=status.HTTP_201_CREATED)
            audit_now(self, request, response)
        return response

    @extend_schema(summary="Show a webhook", responses=WebhookSerializer)
    def retrieve(self, request, pk=None):
        return Response(WebhookSerializer(self.get_object()).data)

    @extend_schema(
        summary="Update a webhook", request=WebhookUpdateRequest, responses=WebhookSerializer
    )
    @network_first
    def partial_update(self, request, pk=None):
        webhook = self.get_object()
        # A new URL's host is resolved with no transaction open; the change (made on the
        # row as it is then) and its audit row commit in one short transaction.
        payload = WebhookUpdateRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        with transaction.atomic():
            webhook = services.webhook_update(webhook=webhook, **payload.validated_data["webhook"])
            response = Response(WebhookSerializer(webhook).data)
            audit_now(self, request, response)
        return response

    @extend_schema(summary="Delete a webhook and its deliveries", responses={204: None})
    def destroy(self, request, pk=None):
        services.webhook_delete(webhook=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

    @no_request_body
    @extend_schema(summary="Rotate the signing secret", request=None, responses=SecretSerializer)
    @action(detail=True, methods=["post"])
    @idempotent
    def rotate_secret(self, request, pk=None):
        issued = services.webhook_rotate_secret(webhook=self.get_object())
        return Response({"id": str(issued.webhook.id), "secret": issued.secret})

    @extend_schema(
        summary="List a webhook's delivery attempts, newest first",
        parameters=[
            OpenApiParameter(
                "limit", int, description="How many (default 100, at most 1000).", required=False
            )
        ],
        responses=WebhookDeliverySerializer(many=True),
    )
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        webhook = self.get_object()
        limit = parse_limit(request, default=100, maximum=1000)
        rows = selectors.delivery_list(webhook=webhook, limit=limit)
        return Response(WebhookDeliverySerializer(rows, many=True).data)

    @extend_schema(
        summary="Show one delivery attempt (poll a pending test delivery)",
        responses=WebhookDeliverySerializer,
    )
    def delivery(self, request, pk=None, delivery_id=None):
        webhook = self.get_object()
        delivery = selectors.delivery_of(webhook=webhook, delivery_id=delivery_id)
        if delivery is None:
            raise WebhookDeliveryNotFound()
        delivery = operations.test_delivery_settle(delivery=delivery)
        return Response(WebhookDeliverySerializer(delivery).data)

    @extend_schema(
        summary="Send a test event to a webhook",
        description="Queued for the webhooks workers, never made inside the request: "
        "answers 202 with the attempt, `state: pending`, and its address in `Location`; "
        "poll it until `state` is `succeeded` or `failed`.",
        request=WebhookTestRequest,
        responses={202: WebhookDeliverySerializer},
    )
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        webhook = self.get_object()
        payload = WebhookTestRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        delivery = operations.webhook_test_send(
            webhook=webhook, event_type=payload.validated_data["type"]
        )
        return Response(
            WebhookDeliverySerializer(delivery).data,
            status=status.HTTP_202_ACCEPTED,
            headers={"Location": f"/webhooks/{webhook.id}/deliveries/{delivery.id}"},
        )

    @extend_schema(
        summary="Deliver again every delivery that ended failed since a time",
        request=WebhookReplayRequest,
        responses=WebhookReplayResponse,
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def replay(self, request, pk=None):
        webhook = self.get_object()
        payload = WebhookReplayRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        replayed = operations.webhook_replay(webhook=webhook, since=payload.validated_data["since"])
        return Response({"replayed": replayed.replayed, "has_more": replayed.has_more})

    @no_request_body
    @extend_schema(
        summary="Deliver one delivery's event again",
        request=None,
        responses=RedeliveryResponse,
    )
    def redeliver(self, request, pk=None, delivery_id=None):
        webhook = self.get_object()
        delivery = selectors.delivery_of(webhook=webhook, delivery_id=delivery_id)
        if delivery is None:
            raise WebhookDeliveryNotFound()
        job = operations.delivery_redeliver(delivery=delivery)
        return Response({"event_id": str(job.id), "state": job.state})


class WebhookEventTypesView(ServiceAPIView):
    """The event catalog (webhooks.catalog)."""

    @extend_schema(
        summary="List the webhook event types and the JSON Schema of their data",
        responses=WebhookEventTypeSerializer(many=True),
    )
    def get(self, request):
        return Response([item.as_json() for item in EVENT_CATALOG.values()])


class WebhookMalformedIdView(ServiceAPIView):
    """/webhooks/<not a UUID>...: the same 404 as an unknown id (after authentication)."""

    schema = None

    def _not_found(self, request, *args, **kwargs):
        raise WebhookNotFound()

    get = post = patch = put = delete = _not_found
