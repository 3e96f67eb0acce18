"""HTTP API of conversations (docs/conversations.md): `/replies`, and the thread of an
enrollment (under its campaign's path), thin views over the selectors and services."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins
from rest_framework.response import Response

from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedAPIView, AccountScopedViewSet
from outreach.campaigns import selectors as campaigns_selectors
from outreach.conversations import selectors, services
from outreach.conversations.serializers import (
    ReplyFiltersSerializer,
    ReplySerializer,
    ReplyUpdateSerializer,
    ThreadEntrySerializer,
)
from outreach.errors import CampaignNotFound, ReplyNotFound
from outreach.models.campaigns import Campaign
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
        queryset = selectors.replies_filter(self.get_queryset(), filters.validated_data)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ReplySerializer(page, many=True).data)

    @extend_schema(request=ReplyUpdateSerializer, responses=ReplySerializer)
    def partial_update(self, request, pk=None):
        reply = self.get_object()
        serializer = ReplyUpdateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        reply = services.reply_update(reply=reply, **serializer.validated_data)
        return Response(ReplySerializer(reply).data)


class ThreadView(AccountScopedAPIView):
    """`GET /campaigns/:id/enrollments/:enrollment_id/thread`: the conversation of one
    enrollment of the caller's campaign (docs/conversations.md, "The thread")."""

    queryset = Campaign.objects.all()
    not_found_error = CampaignNotFound

    @extend_schema(
        operation_id="campaigns_enrollments_thread_list",
        tags=["campaigns"],
        responses=ThreadEntrySerializer(many=True),
        summary="The conversation of an enrollment",
        description="Each step as sent, each reply and each response, oldest first.",
    )
    def get(self, request, pk=None, enrollment_id=None):
        campaign = self.get_object()
        enrollment = campaigns_selectors.campaign_enrollment(
            campaign=campaign, enrollment_id=enrollment_id
        )
        entries = selectors.enrollment_thread(enrollment=enrollment)
        return Response(ThreadEntrySerializer(entries, many=True).data)
