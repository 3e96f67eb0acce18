"""Test-only endpoints that exercise every outcome of @idempotent. Each one
writes a row first (an API key labelled `probe-<mode>`) so the tests can see
whether side effects committed."""

from django.urls import include, path
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from accounts.idempotency import idempotent
from accounts.services import api_key_create
from billing.errors import PlanLimitReached
from config.api.viewsets import ServiceAPIView as APIView


class IdempotentProbe(APIView):
    @idempotent
    def post(self, request, mode):
        api_key_create(account=request.user, label=f"probe-{mode}")
        if mode == "service-error":
            raise PlanLimitReached(details={"current_period_sends": 100, "monthly_limit": 100})
        if mode == "crash":
            raise RuntimeError("boom")
        if mode == "unavailable":
            return Response({"status": "down"}, status=503)
        if mode == "empty":
            return Response(status=204)
        return Response(
            {"mode": mode, "echo": request.data},
            status=201,
            headers={"Location": "/probe/thing", "X-Probe": "yes"},
        )


class IdempotentUpload(APIView):
    parser_classes = [MultiPartParser]

    @idempotent
    def post(self, request):
        api_key_create(account=request.user, label="probe-upload")
        upload = request.FILES["file"]
        return Response({"name": upload.name, "size": upload.size, "note": request.data["note"]})


urlpatterns = [
    path("probe/upload", IdempotentUpload.as_view()),
    path("probe/idempotent/<str:mode>", IdempotentProbe.as_view()),
    path("", include("config.urls")),
]
handler500 = "config.api.handlers.server_error"
