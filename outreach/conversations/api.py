"""HTTP API of conversations (docs/conversations.md): `/replies`, thin views over the
selectors and services. The thread of an enrollment is under its campaign
(outreach.campaigns.api)."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins
from rest_framework.response import Response

from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedViewSet
from outreach.conversations import selectors, services
from outreach.conversations.serializers import (
    ReplyFiltersSerializer,
    ReplySerializer,
    ReplyUpdateSerializer,
)
from outreach.errors import ReplyNotFound
from outreach.models.conversations import Reply


class ReplyViewSet(mixins.RetrieveModelMixin, AccountScopedViewSet):
    queryset = Reply.objects.all()
    serializer_class = ReplySerializer
    not_found_error = ReplyNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "patch"]

    @extend_schema(
        parameters=[
            OpenApiParameter("campaign_id", OpenApiTypes.UUID),
            OpenApiParameter("credential_id", OpenApiTypes.UUID),
            OpenApiParameter("enrollment_id", OpenApiTypes.UUID),
            OpenApiParameter("label", OpenApiTypes.STR, enum=Reply.Label.values),
            OpenApiParameter("read", OpenApiTypes.BOOL),
            OpenApiParameter(
                "received_after",
                OpenApiTypes.DATETIME,
                description="Replies received after this time (RFC 3339).",
            ),
        ]
    )
    def list(self, request):
        filters = ReplyFiltersSerializer(data=request.query_params)
        if not filters.is_valid():
            raise ValidationFailed(filters.errors)
        queryset = selectors.replies_of(account=request.user, filters=filters.validated_data)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ReplySerializer(page, many=True).data)

    @extend_schema(request=ReplyUpdateSerializer, responses=ReplySerializer)
    def partial_update(self, request, pk=None):
        reply = self.get_object()
        serializer = ReplyUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        reply = services.reply_update(reply=reply, **serializer.validated_data)
        return Response(ReplySerializer(reply).data)
