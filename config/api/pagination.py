"""Cursor pagination for lists that grow without bound: `limit` (default 100,
max 1000) and `starting_after=<id>`, newest first, with a `Link: rel="next"`
header while more remain."""

from urllib.parse import urlencode

from django.db.models import Q
from rest_framework.pagination import BasePagination
from rest_framework.response import Response

from config.api.errors import ValidationFailed
from config.api.viewsets import is_uuid

DEFAULT_LIMIT = 100
MAX_LIMIT = 1000


def parse_limit(request, *, default: int = DEFAULT_LIMIT, maximum: int = MAX_LIMIT) -> int:
    raw = request.query_params.get("limit")
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ValidationFailed({"limit": ["Must be an integer."]}) from None
    if not 1 <= value <= maximum:
        raise ValidationFailed({"limit": [f"Must be between 1 and {maximum}."]})
    return value


class StartingAfterPagination(BasePagination):
    """Keyset pagination on (created_at, id), newest first: stable under inserts."""

    def paginate_queryset(self, queryset, request, view=None):
        self.request = request
        self.limit = parse_limit(request)
        after = request.query_params.get("starting_after")
        if after:
            anchor = (
                queryset.filter(pk=after).values("created_at", "pk").first()
                if is_uuid(after)
                else None
            )
            if anchor is None:
                raise ValidationFailed({"starting_after": ["No such object in this list."]})
            queryset = queryset.filter(
                Q(created_at__lt=anchor["created_at"])
                | Q(created_at=anchor["created_at"], pk__lt=anchor["pk"])
            )
        page = list(queryset.order_by("-created_at", "-pk")[: self.limit + 1])
        self.has_more = len(page) > self.limit
        page = page[: self.limit]
        self.last_id = page[-1].pk if page else None
        return page

    def get_paginated_response(self, data):
        response = Response(data)
        if self.has_more:
            params = self.request.query_params.copy()
            params["starting_after"] = str(self.last_id)
            params["limit"] = str(self.limit)
            url = self.request.build_absolute_uri(self.request.path)
            response["Link"] = f'<{url}?{urlencode(sorted(params.items()))}>; rel="next"'
        return response

    def get_paginated_response_schema(self, schema):
        return schema

    def get_schema_operation_parameters(self, view):
        return [
            {
                "name": "limit",
                "in": "query",
                "required": False,
                "schema": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_LIMIT,
                    "default": DEFAULT_LIMIT,
                },
            },
            {
                "name": "starting_after",
                "in": "query",
                "required": False,
                "description": "Id of the last object of the previous page.",
                "schema": {"type": "string", "format": "uuid"},
            },
        ]
