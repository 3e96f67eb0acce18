"""/webhooks: thin views over webhooks.services and webhooks.selectors."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.fields import TimestampField
from config.api.pagination import parse_limit
from config.api.viewsets import AccountScopedViewSet, ServiceAPIView
from webhooks import selectors, services
from webhooks.errors import WebhookNotFound
from webhooks.models import ALL_EVENTS, Webhook, WebhookDelivery
from webhooks.validators import MAX_URL_LENGTH, event_filter_problems, url_problems


class WebhookSerializer(serializers.ModelSerializer):
    event_filters = serializers.ListField(child=serializers.CharField())

    class Meta:
        model = Webhook
        fields = ["id", "url", "event_filters", "disabled_at", "consecutive_failures", "created_at"]


class WebhookWithSecretSerializer(WebhookSerializer):
    secret = serializers.CharField(help_text="`whsec_...`. Shown only here and by rotate_secret.")

    class Meta(WebhookSerializer.Meta):
        fields = [*WebhookSerializer.Meta.fields, "secret"]


class SecretSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    secret = serializers.CharField()


class WebhookDeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event_type",
            "attempt",
            "status_code",
            "error",
            "delivered_at",
            "created_at",
        ]


class _WebhookFieldsInput(serializers.Serializer):
    url = serializers.CharField(max_length=MAX_URL_LENGTH, trim_whitespace=False)
    event_filters = serializers.ListField(
        child=serializers.CharField(), help_text=f'Event types, or ["{ALL_EVENTS}"] for all.'
    )

    def validate_url(self, value: str) -> str:
        problems = url_problems(value)
        if problems:
            raise serializers.ValidationError(problems)
        return value

    def validate_event_filters(self, value: list[str]) -> list[str]:
        problems = event_filter_problems(value)
        if problems:
            raise serializers.ValidationError(problems)
        return value


class WebhookCreateInput(_WebhookFieldsInput):
    event_filters = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        default=lambda: [ALL_EVENTS],
        help_text=f'Event types, or ["{ALL_EVENTS}"] for all (the default).',
    )


class WebhookUpdateInput(_WebhookFieldsInput):
    url = serializers.CharField(max_length=MAX_URL_LENGTH, trim_whitespace=False, required=False)
    event_filters = serializers.ListField(child=serializers.CharField(), required=False)
    disabled_at = TimestampField(
        allow_null=True,
        required=False,
        help_text="null re-enables (and resets consecutive_failures); a timestamp disables, "
        "recording the server's current time.",
    )


class WebhookCreateRequest(serializers.Serializer):
    webhook = WebhookCreateInput()


class WebhookUpdateRequest(serializers.Serializer):
    webhook = WebhookUpdateInput()


class WebhookViewSet(AccountScopedViewSet):
    """Outbound webhook endpoints of the caller's account."""

    queryset = Webhook.objects.all()
    not_found_error = WebhookNotFound

    @extend_schema(summary="List webhooks", responses=WebhookSerializer(many=True))
    def list(self, request):
        return Response(
            WebhookSerializer(selectors.webhook_list(account=request.user), many=True).data
        )

    @extend_schema(
        summary="Register a webhook",
        request=WebhookCreateRequest,
        responses={201: WebhookWithSecretSerializer},
    )
    @idempotent
    def create(self, request):
        payload = WebhookCreateRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        issued = services.webhook_create(account=request.user, **payload.validated_data["webhook"])
        body = WebhookWithSecretSerializer(issued.webhook).data | {"secret": issued.secret}
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(summary="Show a webhook", responses=WebhookSerializer)
    def retrieve(self, request, pk=None):
        return Response(WebhookSerializer(self.get_object()).data)

    @extend_schema(
        summary="Update a webhook", request=WebhookUpdateRequest, responses=WebhookSerializer
    )
    def partial_update(self, request, pk=None):
        webhook = self.get_object()
        payload = WebhookUpdateRequest(data=request.data)
        payload.is_valid(raise_exception=True)
        webhook = services.webhook_update(webhook=webhook, **payload.validated_data["webhook"])
        return Response(WebhookSerializer(webhook).data)

    @extend_schema(summary="Delete a webhook and its deliveries", responses={204: None})
    def destroy(self, request, pk=None):
        services.webhook_delete(webhook=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)

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


class WebhookMalformedIdView(ServiceAPIView):
    """/webhooks/<not a UUID>...: the same 404 as an unknown id (after authentication)."""

    schema = None

    def _not_found(self, request, *args, **kwargs):
        raise WebhookNotFound()

    get = post = patch = put = delete = _not_found
