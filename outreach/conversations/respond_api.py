"""HTTP API of responding to a reply, `POST /replies/:id/respond` (docs/conversations.md,
"Responding"): a thin view over outreach.conversations.respond."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.fields import StrictCharField, TimestampField
from config.api.serializers import StrictSerializer
from config.api.viewsets import AccountScopedAPIView
from outreach.conversations.respond import response_create
from outreach.errors import ReplyNotFound
from outreach.models.conversations import Reply, ReplyResponse


def _bounded(value: str) -> str:
    """Bodies are bounded like the ones the service keeps of a reply
    (REPLY_BODY_MAX_CHARS, read per request)."""
    limit = settings.REPLY_BODY_MAX_CHARS
    if len(value) > limit:
        raise serializers.ValidationError(f"Ensure this field has no more than {limit} characters.")
    return value


class ResponseCreateSerializer(StrictSerializer):
    body_text = StrictCharField(trim_whitespace=False)
    body_html = StrictCharField(required=False, allow_blank=True, default="", trim_whitespace=False)

    def validate_body_text(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        return _bounded(value)

    def validate_body_html(self, value: str) -> str:
        return _bounded(value)

    def validate(self, attrs):
        # A misspelt field must not be dropped silently (docs/api.md).
        if isinstance(self.initial_data, dict):
            unknown = sorted(set(self.initial_data) - set(self.fields))
            if unknown:
                raise serializers.ValidationError({name: ["Unknown field."] for name in unknown})
        return attrs


class ResponseSerializer(StrictSerializer):
    """A response to a reply, as the API shows it."""

    id = serializers.UUIDField(read_only=True)
    reply_id = serializers.UUIDField(read_only=True)
    enrollment_id = serializers.UUIDField(read_only=True)
    status = serializers.ChoiceField(choices=ReplyResponse.Status.choices, read_only=True)
    subject = serializers.CharField(read_only=True)
    to = serializers.CharField(source="to_email", read_only=True)
    sent_at = TimestampField(read_only=True)
    error = serializers.SerializerMethodField()
    created_at = TimestampField(read_only=True)

    def get_error(self, response: ReplyResponse) -> str | None:
        return response.error or None


class ReplyRespondView(AccountScopedAPIView):
    """Answer a reply from the mailbox that received it, in its thread."""

    queryset = Reply.objects.select_related("credential", "contact")
    not_found_error = ReplyNotFound
    lookup_url_kwarg = "reply_id"
    serializer_class = ResponseCreateSerializer

    @extend_schema(
        request=ResponseCreateSerializer,
        responses={201: ResponseSerializer},
        summary="Respond to a reply",
        description="Sends `body_text` (and `body_html`) at once from the mailbox that "
        "received the reply, as `Re: <subject>` with In-Reply-To and References, to the "
        "address the reply came from. 201 with the response, `queued`; its `status` "
        "becomes `sent` or `failed`. Accepts Idempotency-Key.",
    )
    @idempotent
    def post(self, request, reply_id=None):
        reply = self.get_object()
        serializer = ResponseCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        response = response_create(
            account=request.user,
            reply=reply,
            body_text=serializer.validated_data["body_text"],
            body_html=serializer.validated_data["body_html"],
        )
        return Response(ResponseSerializer(response).data, status=status.HTTP_201_CREATED)
