"""Service-level endpoints: the root index, health and the error-code pages."""

import logging
import re

from django.conf import settings
from django.db import connection
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils.cache import patch_vary_headers
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from config.api.errors import COMPACT, ERROR_CODES
from config.api.handlers import methods_allowed
from config.api.viewsets import ServiceAPIView

logger = logging.getLogger(__name__)


def _database_ok() -> bool:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
        return True
    except Exception:
        logger.warning("health: database unreachable", exc_info=True)
        return False


def _broker_ok() -> bool:
    from config.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
        return True
    except Exception:
        logger.warning("health: broker unreachable", exc_info=True)
        return False


class HealthView(ServiceAPIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(
        summary="Service health",
        responses={
            (200, "application/json"): inline_serializer(
                "Health",
                {"status": serializers.CharField(), "checks": serializers.DictField()},
            ),
            (503, "application/json"): inline_serializer(
                "HealthDown",
                {"status": serializers.CharField(), "checks": serializers.DictField()},
            ),
        },
    )
    def get(self, request):
        checks = {"database": _database_ok(), "broker": _broker_ok()}
        healthy = all(checks.values())
        body = {
            "status": "ok" if healthy else "unavailable",
            "checks": {name: "ok" if ok else "unavailable" for name, ok in checks.items()},
        }
        return Response(body, status=200 if healthy else 503)


_CODE_SPAN = re.compile(r"`([^`]+)`")


def inline_markdown(text: str) -> SafeString:
    """The registry's texts are written with Markdown code spans (`name`): HTML-escaped,
    with each span as <code>."""
    return mark_safe(_CODE_SPAN.sub(r"<code>\1</code>", escape(text)))  # noqa: S308


def _page_entry(entry) -> dict:
    return {
        "code": entry.code,
        "status": entry.status,
        "message": entry.message,
        "message_html": inline_markdown(entry.message),
        "description_html": inline_markdown(entry.description),
    }


def error_code_page(request, code: str):
    entry = ERROR_CODES.get(code)
    if entry is None:
        raise Http404
    return render(
        request, "errors/code.html", {"error": _page_entry(entry), "docs_url": settings.DOCS_URL}
    )


def error_index_page(request):
    codes = [
        _page_entry(entry)
        for entry in sorted(ERROR_CODES.values(), key=lambda e: (e.status, e.code))
    ]
    return render(request, "errors/index.html", {"codes": codes, "docs_url": settings.DOCS_URL})


# What `/` answers: JSON (the links below) unless the request's Accept prefers HTML to
# JSON, as a browser's does. No Accept, */* (curl, the SDK, HTTP libraries) and an
# Accept of neither get the JSON every API client had from `/` before the page existed.
ROOT_TYPES = ["application/json", "text/html"]


def _root_links(request) -> dict[str, str]:
    return {
        "docs": request.build_absolute_uri("/docs"),
        "schema": request.build_absolute_uri("/schema"),
        "health": request.build_absolute_uri("/health"),
        "admin": request.build_absolute_uri("/admin/"),
        "errors": request.build_absolute_uri("/docs/errors"),
    }


@methods_allowed("GET", "HEAD")
def root_index(request):
    """GET /: where to go from here (the API has no resource at its root). A page for a
    browser, the same links as JSON for a client (ROOT_TYPES)."""
    links = _root_links(request)
    response: HttpResponse
    if request.get_preferred_type(ROOT_TYPES) == "text/html":
        response = render(request, "root.html", {"links": links})
    else:
        response = JsonResponse(
            {"name": "Outreach Service API", **links}, json_dumps_params=COMPACT
        )
    patch_vary_headers(response, ["Accept"])
    return response
