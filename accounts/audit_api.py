"""`GET /audit_events` (docs/audit.md): the account's audit log, newest first, in cursor
pages, filtered by `api_key_id`, `resource_type`, `resource_id`, `action` and `since`
(inclusive). Any other query parameter, or a malformed value, is 422 naming it."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import serializers

from accounts.models import AuditEvent
from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.serializers import QueryFiltersSerializer, StrictSerializer
from config.api.viewsets import AccountScopedViewSet

PAGINATION_PARAMETERS = frozenset({"limit", "starting_after"})


class AuditEventFiltersSerializer(QueryFiltersSerializer):
    api_key_id = serializers.UUIDField(required=False)
    resource_type = serializers.CharField(required=False, max_length=50)
    resource_id = serializers.CharField(required=False, max_length=64)
    action = serializers.CharField(required=False, max_length=100)
    since = serializers.DateTimeField(required=False)

    def to_internal_value(self, data):
        unknown = sorted(set(data) - set(self.fields) - PAGINATION_PARAMETERS)
        if unknown:
            raise serializers.ValidationError(
                {name: ["Unknown query parameter."] for name in unknown}
            )
        return super().to_internal_value(data)


class AuditActorSerializer(StrictSerializer):
    type = serializers.ChoiceField(choices=AuditEvent.ActorType.choices)
    id = serializers.CharField(allow_null=True)
    prefix = serializers.CharField(required=False, help_text="An API key's prefix.")
    username = serializers.CharField(required=False, help_text="A staff user's username.")
    client_kind = serializers.CharField(allow_null=True)


class AuditResourceSerializer(StrictSerializer):
    type = serializers.CharField()
    id = serializers.CharField(allow_null=True)


def actor_of(event: AuditEvent) -> dict:
    actor: dict = {
        "type": event.actor_type,
        "id": event.actor_id or None,
        "client_kind": event.actor_client_kind or None,
    }
    if event.actor_type == AuditEvent.ActorType.API_KEY:
        actor["prefix"] = event.actor_name
    elif event.actor_type == AuditEvent.ActorType.STAFF:
        actor["username"] = event.actor_name
    return actor


class AuditEventSerializer(StrictSerializer):
    id = serializers.UUIDField(read_only=True)
    occurred_at = serializers.DateTimeField(source="created_at", read_only=True)
    actor = serializers.SerializerMethodField()
    action = serializers.CharField(read_only=True)
    resource = serializers.SerializerMethodField()
    request_id = serializers.CharField(read_only=True)
    idempotency_key = serializers.SerializerMethodField()
    ip = serializers.CharField(read_only=True, allow_null=True)
    changes = serializers.ListField(child=serializers.CharField(), read_only=True)

    @extend_schema_field(AuditActorSerializer)
    def get_actor(self, event: AuditEvent) -> dict:
        return actor_of(event)

    @extend_schema_field(AuditResourceSerializer)
    def get_resource(self, event: AuditEvent) -> dict:
        return {"type": event.resource_type, "id": event.resource_id or None}

    def get_idempotency_key(self, event: AuditEvent) -> str | None:
        return event.idempotency_key or None


class AuditEventViewSet(AccountScopedViewSet):
    """Admin keys only (API.md §19), by the roles rule (config.api.roles)."""

    queryset = AuditEvent.objects.all()
    serializer_class = AuditEventSerializer
    pagination_class = StartingAfterPagination

    @extend_schema(
        summary="List audit events",
        parameters=[
            OpenApiParameter("api_key_id", OpenApiTypes.UUID),
            OpenApiParameter("resource_type", OpenApiTypes.STR),
            OpenApiParameter("resource_id", OpenApiTypes.STR),
            OpenApiParameter("action", OpenApiTypes.STR, description="e.g. `campaign.update`"),
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="Inclusive."),
        ],
        responses=AuditEventSerializer(many=True),
    )
    def list(self, request):
        filters = AuditEventFiltersSerializer(data=request.query_params)
        if not filters.is_valid():
            raise ValidationFailed(filters.errors)
        events = self.get_queryset()
        wanted = dict(filters.validated_data)
        if "api_key_id" in wanted:
            events = events.filter(
                actor_type=AuditEvent.ActorType.API_KEY, actor_id=str(wanted.pop("api_key_id"))
            )
        if "since" in wanted:
            events = events.filter(created_at__gte=wanted.pop("since"))
        events = events.filter(**wanted)
        page = self.paginate_queryset(events)
        return self.get_paginated_response(AuditEventSerializer(page, many=True).data)
