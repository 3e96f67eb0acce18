"""The service's routes plus the views bench/bench_auth.py compares GET /api_keys
with: a bare DRF view (no authentication, throttling or database access), and
two steps in between that say what each layer costs."""

import hashlib

from django.db import connection
from django.urls import include, path
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

BODY = [{"id": "00000000-0000-0000-0000-000000000000", "label": "bare"}]


class BareView(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    def get(self, request):
        return Response(BODY)


class AuthenticatedView(APIView):
    """Bearer authentication (lookup + last_used_at + request count), no throttle."""

    throttle_classes: list = []

    def get(self, request):
        return Response(BODY)


class AuthenticatedThrottledView(APIView):
    """Authentication and the per-key rate limit (the project defaults), no view query."""

    def get(self, request):
        return Response(BODY)


FLOOR_UPDATE = "UPDATE accounts_apikey SET last_used_at = now() WHERE key_hash = %s"


class DurableUpdateView(APIView):
    """The floor the accounts issue sets for any authenticated request: one durable
    single-row UPDATE (last_used_at by key hash), here as bare as it gets: no
    authentication class, no ORM, a prepared statement. Not a way to
    authenticate (the answer ignores the result); it shows what share of the bare
    view's throughput one committed write per request leaves."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    def get(self, request):
        token = request.headers.get("Authorization", "").removeprefix("Bearer ")
        with connection.cursor() as cursor:
            cursor.execute(FLOOR_UPDATE, [hashlib.sha256(token.encode()).hexdigest()])
        return Response(BODY)


urlpatterns = [
    path("bench/bare", BareView.as_view()),
    path("bench/durable-update", DurableUpdateView.as_view()),
    path("bench/auth", AuthenticatedView.as_view()),
    path("bench/auth-throttle", AuthenticatedThrottledView.as_view()),
    path("", include("config.urls")),
]
