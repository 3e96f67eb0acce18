"""Serializers of the conversations API: replies, their update, the list's filters, the
thread of an enrollment and the responses to a reply (docs/conversations.md)."""

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.fields import StrictBooleanField, StrictCharField, TimestampField
from config.api.serializers import (
    QueryFiltersSerializer,
    RefusalSerializer,
    StrictModelSerializer,
    StrictSerializer,
)
from outreach.api_fields import BlankAsNullChoiceField
from outreach.conversations.selectors import ThreadEntry
from outreach.models.conversations import Reply, ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sequences import RuleFire


class AttachmentSerializer(StrictSerializer):
    filename = serializers.CharField()
    content_type = serializers.CharField()
    size = serializers.IntegerField(help_text="Bytes, decoded.")


class RuleOutcomeSerializer(StrictSerializer):
    label = serializers.CharField()  # type: ignore[assignment]  # the metaclass takes fields off the class
    campaign_id = serializers.UUIDField()
    outcome = serializers.ChoiceField(choices=RuleFire.Outcome.choices)


class ReplySerializer(StrictModelSerializer):
    enrollment_id = serializers.UUIDField(read_only=True)
    campaign_id = serializers.UUIDField(read_only=True)
    contact_id = serializers.UUIDField(read_only=True)
    credential_id = serializers.UUIDField(read_only=True, allow_null=True)
    to = serializers.ListField(child=serializers.CharField(), read_only=True)
    cc = serializers.ListField(child=serializers.CharField(), read_only=True)
    in_reply_to = serializers.SerializerMethodField()
    attachments = AttachmentSerializer(many=True, read_only=True)
    label = BlankAsNullChoiceField(choices=Reply.Label.choices, read_only=True)  # type: ignore[assignment]  # the metaclass takes fields off the class
    label_source = BlankAsNullChoiceField(choices=Reply.LabelSource.choices, read_only=True)
    rule_outcomes = RuleOutcomeSerializer(
        many=True,
        read_only=True,
        help_text="What the campaign's on_reply rules did for this reply's labels "
        '(docs/outreach.md, "Follow-up campaigns").',
    )
    sender_verified = serializers.BooleanField(
        read_only=True,
        help_text="Whether the sender was verified: the message answers one the service sent "
        "(In-Reply-To/References), or the receiving server's DMARC passed for its From "
        "domain. False: matched by its From address alone; kept and shown, but it changed "
        "nothing (no enrollment.replied, no stop, no unsubscribe, no out-of-office delay).",
    )

    class Meta:
        model = Reply
        fields = [
            "id",
            "enrollment_id",
            "campaign_id",
            "contact_id",
            "credential_id",
            "from_email",
            "from_name",
            "to",
            "cc",
            "subject",
            "received_at",
            "message_id",
            "in_reply_to",
            "text",
            "new_text",
            "html",
            "truncated",
            "attachments",
            "label",
            "label_source",
            "sender_verified",
            "returns_on",
            "read",
            "rule_outcomes",
            "body_purged_at",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_in_reply_to(self, reply: Reply) -> str | None:
        return reply.in_reply_to or None


class ReplyUpdateSerializer(StrictSerializer):
    """`PATCH /replies/:id`: `read`, and `label` (null clears it). A label set here is
    `manual`."""

    # A client may send back the reply it read: its other fields are accepted, ignored.
    echo_fields = tuple(f for f in ReplySerializer.Meta.fields if f not in ("read", "label"))

    read = StrictBooleanField(required=False)
    label = BlankAsNullChoiceField(choices=Reply.Label.choices, required=False)  # type: ignore[assignment]  # as above


class ReplyFiltersSerializer(QueryFiltersSerializer):
    """The query parameters of `GET /replies`."""

    campaign_id = serializers.UUIDField(required=False)
    credential_id = serializers.UUIDField(required=False)
    enrollment_id = serializers.UUIDField(required=False)
    label = serializers.ChoiceField(choices=Reply.Label.choices, required=False)  # type: ignore[assignment]  # as above
    read = serializers.ChoiceField(choices=["true", "false"], required=False)
    received_after = serializers.DateTimeField(required=False)

    def validate_read(self, value: str) -> bool:
        return value == "true"


class ThreadAttemptSerializer(StrictSerializer):
    """One SMTP attempt of a step (docs/conversations.md, "The thread")."""

    id = serializers.IntegerField()
    step = serializers.IntegerField()
    credential_id = serializers.UUIDField(allow_null=True)
    outcome = serializers.CharField()
    reply_code = serializers.IntegerField(allow_null=True)
    reply_text = serializers.CharField()
    outcome_unknown = serializers.BooleanField()
    started_at = serializers.DateTimeField(source="sending_at", allow_null=True)
    finished_at = serializers.DateTimeField()
    duration_ms = serializers.IntegerField(allow_null=True)


class ThreadStepSerializer(StrictSerializer):
    message_id = serializers.CharField()
    step = serializers.IntegerField()
    key = serializers.CharField(source="step_key", help_text="The step's key when it was sent.")
    variant = serializers.CharField()
    subject = serializers.CharField()
    text = serializers.CharField()
    to = serializers.CharField(source="to_email")
    sent_at = serializers.DateTimeField()
    attempt = serializers.SerializerMethodField()

    @extend_schema_field(ThreadAttemptSerializer(allow_null=True))
    def get_attempt(self, message):
        attempt = self.context.get("attempt")
        return ThreadAttemptSerializer(attempt).data if attempt is not None else None


class ThreadResponseSerializer(StrictModelSerializer):
    reply_id = serializers.UUIDField(read_only=True)
    to = serializers.CharField(source="to_email", read_only=True)
    text = serializers.CharField(source="body_text", read_only=True)
    error = serializers.SerializerMethodField()

    class Meta:
        model = ReplyResponse
        fields = [
            "id",
            "reply_id",
            "message_id",
            "status",
            "subject",
            "to",
            "text",
            "sent_at",
            "error",
            "created_at",
        ]
        read_only_fields = fields

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_error(self, response: ReplyResponse) -> str | None:
        return response.error or None


class ThreadBranchSerializer(StrictSerializer):
    """A branch of the sequence decided (API.md 17): its key, `then` (its event came) or
    `else` (its deadline passed), and the key it led to ("end": none)."""

    key = serializers.CharField()
    outcome = serializers.CharField()
    next_key = serializers.CharField()


class ThreadEntrySerializer(StrictSerializer):
    """One entry of the thread: `type` says which of `step`, `reply`, `response`,
    `attempt` and `branch` carries it (the others are null)."""

    type = serializers.ChoiceField(
        choices=["step", "reply", "response", "attempt", "branch"], source="kind"
    )
    at = serializers.DateTimeField()
    auth_method = serializers.SerializerMethodField(
        help_text="The `auth_method` of the mailbox the entry went through or came in to "
        "(`simulator` for a simulator mailbox's); null once that mailbox is deleted."
    )
    step = serializers.SerializerMethodField()
    reply = serializers.SerializerMethodField()
    response = serializers.SerializerMethodField()
    attempt = serializers.SerializerMethodField()
    branch = serializers.SerializerMethodField()

    @extend_schema_field(ThreadBranchSerializer(allow_null=True))
    def get_branch(self, entry: ThreadEntry):
        return ThreadBranchSerializer(entry.item).data if entry.kind == "branch" else None

    @extend_schema_field(
        serializers.ChoiceField(choices=SmtpCredential.AuthMethod.choices, allow_null=True)
    )
    def get_auth_method(self, entry: ThreadEntry) -> str | None:
        credential = getattr(entry.item, "credential", None)
        return credential.auth_method if credential is not None else None

    @extend_schema_field(ThreadStepSerializer(allow_null=True))
    def get_step(self, entry: ThreadEntry):
        if entry.kind != "step":
            return None
        return ThreadStepSerializer(entry.item, context={"attempt": entry.attempt}).data

    @extend_schema_field(ReplySerializer(allow_null=True))
    def get_reply(self, entry: ThreadEntry):
        return ReplySerializer(entry.item).data if entry.kind == "reply" else None

    @extend_schema_field(ThreadResponseSerializer(allow_null=True))
    def get_response(self, entry: ThreadEntry):
        return ThreadResponseSerializer(entry.item).data if entry.kind == "response" else None

    @extend_schema_field(ThreadAttemptSerializer(allow_null=True))
    def get_attempt(self, entry: ThreadEntry):
        return ThreadAttemptSerializer(entry.item).data if entry.kind == "attempt" else None


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


class ResponseHeaderSerializer(StrictSerializer):
    name = serializers.CharField()
    value = serializers.CharField()


class ResponsePreviewSerializer(StrictSerializer):
    """What POST /replies/:id/respond would send (outreach.conversations.respond)."""

    reply_id = serializers.UUIDField()
    credential_id = serializers.UUIDField(
        allow_null=True, help_text="The mailbox it goes from; null when it was deleted."
    )
    to = serializers.CharField()
    subject = serializers.CharField()
    in_reply_to = serializers.CharField(allow_null=True)
    references = serializers.ListField(child=serializers.CharField())
    headers = ResponseHeaderSerializer(
        many=True, help_text="From, To, Subject, In-Reply-To, References, as sent."
    )
    body_text = serializers.CharField()
    body_html = serializers.CharField(allow_blank=True)
    refusal = RefusalSerializer(allow_null=True)
