"""HTTP API of the blocklist (docs/deliverability.md, "Blocklist"): `GET /blocklist`
(filters `kind`, `value`), `POST /blocklist` `{entries: [...], reason?}` (up to 10,000),
`DELETE /blocklist/:id`, and `GET /blocklist.csv`."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import mixins, status
from rest_framework.renderers import JSONRenderer
from rest_framework.response import Response

from config.api.csv_export import csv_response
from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedAPIView, AccountScopedViewSet
from config.timestamps import utc_timestamp
from outreach.blocklist import selectors, services
from outreach.blocklist.serializers import (
    BlocklistAddResultSerializer,
    BlocklistAddSerializer,
    BlocklistEntrySerializer,
    BlocklistFiltersSerializer,
)
from outreach.errors import BlocklistEntryNotFound
from outreach.models.blocklist import BlocklistEntry


class BlocklistViewSet(mixins.DestroyModelMixin, AccountScopedViewSet):
    queryset = BlocklistEntry.objects.all()
    serializer_class = BlocklistEntrySerializer
    not_found_error = BlocklistEntryNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post", "delete"]

    @extend_schema(
        parameters=[
            OpenApiParameter("kind", OpenApiTypes.STR, enum=BlocklistEntry.Kind.values),
            OpenApiParameter(
                "value",
                OpenApiTypes.STR,
                description="The entry for this address or domain (any case).",
            ),
        ]
    )
    def list(self, request):
        filters = BlocklistFiltersSerializer(data=request.query_params)
        if not filters.is_valid():
            raise ValidationFailed(filters.errors)
        queryset = selectors.entries_filter(self.get_queryset(), **filters.validated_data)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(BlocklistEntrySerializer(page, many=True).data)

    @extend_schema(request=BlocklistAddSerializer, responses={201: BlocklistAddResultSerializer})
    def create(self, request):
        serializer = BlocklistAddSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        result = services.blocklist_add(
            account=request.user,
            values=serializer.validated_data["entries"],
            reason=serializer.validated_data.get("reason", ""),
        )
        return Response(result, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        services.blocklist_entry_delete(entry=instance)


class BlocklistCsvView(AccountScopedAPIView):
    """`GET /blocklist.csv`: every entry of the account, newest first, as CSV with a
    header row (`value,kind,reason,created_at`), streamed; a cell a spreadsheet would run
    as a formula is written as text (config.api.csv_export)."""

    queryset = BlocklistEntry.objects.all()

    def perform_content_negotiation(self, request, force=False):
        # The body is CSV whatever Accept says; an error is the JSON envelope.
        return JSONRenderer(), JSONRenderer.media_type

    @extend_schema(responses={(200, "text/csv"): OpenApiResponse(OpenApiTypes.STR)})
    def get(self, request):
        rows = self.get_queryset().values_list("value", "kind", "reason", "created_at")
        cells = (
            (value, kind, reason, utc_timestamp(created_at))
            for value, kind, reason, created_at in rows.iterator(chunk_size=2000)
        )
        return csv_response(
            filename="blocklist.csv", header=["value", "kind", "reason", "created_at"], rows=cells
        )
