"""HTTP API of responding to a reply, `POST /replies/:id/respond` and its preview
(docs/conversations.md, "Responding"): thin views over outreach.conversations.respond."""

from drf_spectacular.utils import extend_schema
from rest_framework import status
from rest_framework.response import Response

from accounts.idempotency import idempotent
from accounts.send_limits import key_sends_check
from config.api.viewsets import AccountScopedAPIView
from outreach.approvals.serializers import ApprovalSerializer, approval_accepted
from outreach.approvals.services import approval_request, held_for_approval
from outreach.conversations.respond import response_create, response_preview
from outreach.conversations.serializers import (
    ResponseCreateSerializer,
    ResponsePreviewSerializer,
    ResponseSerializer,
)
from outreach.errors import ReplyNotFound
from outreach.models.conversations import Reply


class ReplyRespondView(AccountScopedAPIView):
    """Answer a reply from the mailbox that received it, in its thread."""

    queryset = Reply.objects.select_related("credential", "contact")
    not_found_error = ReplyNotFound
    lookup_url_kwarg = "reply_id"
    serializer_class = ResponseCreateSerializer
    audit_actions = {"post": "reply.respond"}

    @extend_schema(
        request=ResponseCreateSerializer,
        responses={201: ResponseSerializer, 202: ApprovalSerializer},
        summary="Respond to a reply",
        description="Sends `body_text` (and `body_html`) at once from the mailbox that "
        "received the reply, as `Re: <subject>` with In-Reply-To and References, to the "
        "address the reply came from. 201 with the response, `queued`; its `status` "
        "becomes `sent` or `failed`. Accepts Idempotency-Key. A drafter key's response is "
        "held: 202 with its approval, nothing sent (docs/agents.md).",
    )
    @idempotent
    def post(self, request, reply_id=None):
        reply = self.get_object()
        serializer = ResponseCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if held_for_approval(request.auth):
            key_sends_check(api_key=request.auth, count=1)
            approval = approval_request(
                api_key=request.auth,
                action="respond",
                campaign_id=reply.campaign_id,
                contact_ids=[reply.contact_id],
                reply_id=reply.pk,
                body_text=serializer.validated_data["body_text"],
                body_html=serializer.validated_data["body_html"],
            )
            return approval_accepted(request, approval)
        response = response_create(
            account=request.user,
            reply=reply,
            body_text=serializer.validated_data["body_text"],
            body_html=serializer.validated_data["body_html"],
            api_key=request.auth,
        )
        return Response(ResponseSerializer(response).data, status=status.HTTP_201_CREATED)


class ReplyRespondPreviewView(AccountScopedAPIView):
    """What answering a reply would send, written nowhere."""

    queryset = Reply.objects.select_related("credential", "contact")
    not_found_error = ReplyNotFound
    lookup_url_kwarg = "reply_id"
    serializer_class = ResponseCreateSerializer
    audit_actions = {"post": None}

    @extend_schema(
        request=ResponseCreateSerializer,
        responses=ResponsePreviewSerializer,
        summary="Preview a response to a reply",
        description="What POST /replies/:id/respond with the same body would send now: "
        "the recipient, the subject (`Re: <subject>` on one line, at most 998 "
        "characters), the headers as the message carries them (From, To, Subject, "
        "In-Reply-To, References; Date and Message-ID are made when it is sent), the "
        "bodies, and `refusal`: the error the request would answer instead (its `status` "
        "and envelope), or null. Writes nothing; an invalid body answers the request's 422.",
    )
    def post(self, request, reply_id=None):
        reply = self.get_object()
        serializer = ResponseCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        answer = response_preview(
            account=request.user,
            reply=reply,
            body_text=serializer.validated_data["body_text"],
            body_html=serializer.validated_data["body_html"],
        )
        return Response(ResponsePreviewSerializer(answer).data)
