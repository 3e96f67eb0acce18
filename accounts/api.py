"""POST /signup, /signup/verification and /api_keys: thin views over accounts.services
and accounts.verification."""

from django.conf import settings
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from accounts.errors import ApiKeyNotFound
from accounts.idempotency import idempotent
from accounts.models import ApiKey
from accounts.serializers import (
    ApiKeyCreatedSerializer,
    ApiKeyCreateSerializer,
    ApiKeySerializer,
    EmailVerificationSentSerializer,
    EmailVerificationSerializer,
    SignupResultSerializer,
    SignupSerializer,
)
from accounts.services import Signup, account_signup, api_key_create, api_key_revoke
from accounts.tasks import verification_email_queue
from accounts.throttling import (
    ApiKeyRateThrottle,
    SignupRateThrottle,
    VerificationEmailRateThrottle,
)
from accounts.verification import LINK_MAX_AGE
from config.api.audit import audit_now, network_first
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedViewSet, ServiceAPIView, no_request_body

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    name="Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    description="At most 255 characters. A retry with the same key within 24 hours replays "
    "the first response (with `Idempotent-Replay: true`) instead of acting twice.",
)


class SignupView(ServiceAPIView):
    """Create an account on the free plan, with its first API key."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes = [SignupRateThrottle]
    audit_actions = {"post": "account.signup"}

    @extend_schema(
        summary="Sign up",
        description="Public. Limited to 5 attempts per hour per client IP. "
        "Idempotency-Key is not accepted here (the header is ignored). With "
        "SIGNUP_EMAIL_VERIFICATION on (production), the address is emailed a link that "
        "proves it; until it is opened, dispatch and outreach answer 403 email_unverified.",
        request=SignupSerializer,
        responses={201: SignupResultSerializer},
        auth=[],
    )
    @network_first
    def post(self, request):
        serializer = SignupSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def written(signup: Signup) -> None:  # the row, in the signup's transaction
            audit_now(self, request, _signup_response(signup))

        # Stripe's customer is made before the signup's transaction (accounts.services).
        signup = account_signup(**serializer.validated_data, written=written)
        if settings.SIGNUP_EMAIL_VERIFICATION:
            verification_email_queue(account=signup.account)
        return _signup_response(signup)


def _signup_response(signup: Signup) -> Response:
    key = signup.issued_key
    body = {
        "account_id": signup.account.pk,
        "plan_slug": signup.account.plan.slug,
        "api_key": {
            "id": key.api_key.pk,
            "prefix": key.api_key.prefix,
            "plaintext": key.plaintext,
        },
    }
    return Response(SignupResultSerializer(body).data, status=status.HTTP_201_CREATED)


def _verification_body(account) -> dict:
    return {
        "email": account.email,
        "email_verified": account.email_verified,
        "email_verified_at": account.email_verified_at,
        "verification_required": settings.SIGNUP_EMAIL_VERIFICATION,
    }


class EmailVerificationView(ServiceAPIView):
    """The signup address proof of the caller's account: its state, and a new link."""

    throttle_classes = [ApiKeyRateThrottle, VerificationEmailRateThrottle]
    audit_actions = {"post": None}  # sends an email; changes no data

    @extend_schema(
        summary="Signup address: proven or not",
        responses=EmailVerificationSerializer,
    )
    def get(self, request):
        return Response(EmailVerificationSerializer(_verification_body(request.user)).data)

    @no_request_body
    @extend_schema(
        summary="Send a new signup verification link",
        description="Emails the signup address a new link (valid "
        f"{LINK_MAX_AGE.days} days; earlier links keep working until they expire). Nothing "
        "is sent when the address is proven already (`verification_sent` false). At most 5 "
        "an hour per account (429 rate_limited).",
        request=None,
        responses=EmailVerificationSentSerializer,
    )
    def post(self, request):
        account = request.user
        body = _verification_body(account)
        body["verification_sent"] = not account.email_verified
        if body["verification_sent"]:
            verification_email_queue(account=account)
        return Response(EmailVerificationSentSerializer(body).data)


class ApiKeyViewSet(AccountScopedViewSet):
    queryset = ApiKey.objects.all()
    serializer_class = ApiKeySerializer
    pagination_class = StartingAfterPagination
    not_found_error = ApiKeyNotFound

    @extend_schema(summary="List API keys", responses=ApiKeySerializer(many=True))
    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ApiKeySerializer(page, many=True).data)

    @extend_schema(
        summary="Create an API key",
        request=ApiKeyCreateSerializer,
        responses={201: ApiKeyCreatedSerializer},
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
    )
    @idempotent
    def create(self, request):
        serializer = ApiKeyCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        issued = api_key_create(account=request.user, **serializer.validated_data)
        data = ApiKeySerializer(issued.api_key).data
        data["plaintext"] = issued.plaintext
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(
        summary="Revoke an API key",
        description="422 cannot_revoke_last_key when it is the account's only active key. "
        "Revoking a revoked key is a no-op (204).",
        responses={204: OpenApiResponse(description="Revoked.")},
    )
    def destroy(self, request, pk=None):
        api_key_revoke(api_key=self.get_object())
        return Response(status=status.HTTP_204_NO_CONTENT)
