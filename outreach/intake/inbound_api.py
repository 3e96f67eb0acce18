"""HTTP API of replaying a message into a simulator mailbox, `POST
/smtp_credentials/:id/inbound` (docs/sandbox.md, "Replaying a message"): a thin view
over outreach.intake.replay, the work queued for the intake's worker."""

import base64

from django.conf import settings
from django.db import transaction
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.errors import PayloadTooLarge
from config.api.fields import StrictCharField
from config.api.serializers import StrictSerializer
from config.api.viewsets import AccountScopedAPIView
from outreach.errors import CredentialNotFound, CredentialNotSimulated
from outreach.intake.replay import inbound_message_id
from outreach.intake.tasks import intake_inbound_message
from outreach.models.mailboxes import SmtpCredential


class InboundMessageSerializer(StrictSerializer):
    raw = StrictCharField(
        trim_whitespace=False,
        help_text="The whole message as RFC 5322 text (headers, a blank line, the body), "
        "at most IMAP_MAX_MESSAGE_BYTES once UTF-8 encoded.",
    )

    def validate_raw(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("This field may not be blank.")
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise serializers.ValidationError("Not valid text (a lone surrogate).") from exc
        return value


class InboundMessageView(AccountScopedAPIView):
    """Hand a whole message to a simulator mailbox's intake."""

    queryset = SmtpCredential.objects.all()
    not_found_error = CredentialNotFound
    lookup_url_kwarg = "pk"
    audit_actions = {"post": "smtp_credential.inbound"}
    serializer_class = InboundMessageSerializer

    @extend_schema(
        request=InboundMessageSerializer,
        responses={
            202: inline_serializer(
                "InboundMessageQueued",
                {
                    "credential_id": serializers.UUIDField(),
                    "message_id": serializers.CharField(allow_null=True),
                    "size": serializers.IntegerField(),
                },
            ),
            409: OpenApiResponse(description="credential_not_simulated: a real mailbox"),
            413: OpenApiResponse(description="payload_too_large: over IMAP_MAX_MESSAGE_BYTES"),
        },
        summary="Replay a message into a simulator mailbox",
        description="Takes `raw`, a whole RFC 5322 message, into a simulator mailbox as if "
        "its IMAP poll had found it: a reply threaded (In-Reply-To, References) to a "
        "message the mailbox sent is kept and labelled and does what its label does; a "
        "delivery status report bounces the message it names. 202 with its Message-ID "
        "and size; processed within SIMULATOR_DELAY_SECONDS (see `GET /replies` and the "
        "webhooks). The same message posted twice is kept once. A real mailbox: 409 "
        "`credential_not_simulated`. Accepts Idempotency-Key.",
    )
    @idempotent
    def post(self, request, pk=None):
        credential = self.get_object()
        if not credential.is_simulator:
            raise CredentialNotSimulated(details={"auth_method": credential.auth_method})
        serializer = InboundMessageSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        raw = serializer.validated_data["raw"].encode("utf-8")
        limit = settings.IMAP_MAX_MESSAGE_BYTES
        if len(raw) > limit:
            raise PayloadTooLarge(
                f"The message is {len(raw)} bytes; a mailbox reads at most {limit} bytes "
                "of one (IMAP_MAX_MESSAGE_BYTES).",
                details={"limit_bytes": limit, "field": "raw"},
            )
        encoded = base64.b64encode(raw).decode("ascii")
        transaction.on_commit(lambda: intake_inbound_message.delay(str(credential.pk), encoded))
        body = {
            "credential_id": str(credential.pk),
            "message_id": inbound_message_id(raw),
            "size": len(raw),
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)
