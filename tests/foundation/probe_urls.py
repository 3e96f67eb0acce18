"""Test-only routes that provoke each error class through the real handler stack."""

from django.urls import include, path
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from config.api.viewsets import ServiceAPIView as APIView


class ProbeSerializer(serializers.Serializer):
    email = serializers.EmailField()
    count = serializers.IntegerField(min_value=1)
    nested = serializers.ListField(
        child=serializers.DictField(child=serializers.IntegerField()), required=False
    )


class PublicProbe(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def post(self, request):
        serializer = ProbeSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        return Response(serializer.validated_data, status=201)


class CrashProbe(APIView):
    authentication_classes: list = []
    permission_classes = [AllowAny]

    def get(self, request):
        raise RuntimeError("secret internals: SELECT * FROM accounts_apikey")


class PrivateProbe(APIView):
    def get(self, request):
        return Response({"account_id": str(request.user.id)})


urlpatterns = [
    path("probe/public", PublicProbe.as_view()),
    path("probe/crash", CrashProbe.as_view()),
    path("probe/private", PrivateProbe.as_view()),
    path("", include("config.urls")),
]
handler400 = "config.api.handlers.bad_request"
handler403 = "config.api.handlers.permission_denied"
handler404 = "config.api.handlers.not_found"
handler500 = "config.api.handlers.server_error"
