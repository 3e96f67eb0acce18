"""The service's routes plus the views bench/bench_auth.py compares GET /api_keys
with: a bare DRF view (no authentication, throttling or database access), and
two steps in between that say what each layer costs."""

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


urlpatterns = [
    path("bench/bare", BareView.as_view()),
    path("bench/auth", AuthenticatedView.as_view()),
    path("bench/auth-throttle", AuthenticatedThrottledView.as_view()),
    path("", include("config.urls")),
]
