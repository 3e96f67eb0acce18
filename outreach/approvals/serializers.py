"""The approval as the API and its events show it (docs/agents.md, "Approvals")."""

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers, status
from rest_framework.response import Response

from config.api.audit import audit_as
from config.api.serializers import QueryFiltersSerializer, StrictSerializer
from outreach.models.approvals import Approval


class KeyRefSerializer(StrictSerializer):
    api_key_id = serializers.UUIDField()
    prefix = serializers.CharField()


def _key_ref(key) -> dict | None:
    if key is None:
        return None
    return {"api_key_id": str(key.pk), "prefix": key.prefix}


class ApprovalSerializer(StrictSerializer):
    id = serializers.UUIDField(read_only=True)
    action = serializers.ChoiceField(choices=Approval.Action.choices, read_only=True)
    campaign_id = serializers.UUIDField(read_only=True, allow_null=True)
    contact_ids = serializers.ListField(
        child=serializers.UUIDField(),
        read_only=True,
        allow_null=True,
        help_text="dispatch: the contacts asked for; null: every pending one.",
    )
    contact = serializers.DictField(
        read_only=True, allow_null=True, help_text="outreach: the contact as it was given."
    )
    reply_id = serializers.UUIDField(read_only=True, allow_null=True)
    body_text = serializers.CharField(read_only=True)
    body_html = serializers.CharField(read_only=True)
    requested_by = serializers.SerializerMethodField()
    decided_by = serializers.SerializerMethodField()
    status = serializers.ChoiceField(choices=Approval.Status.choices, read_only=True)
    reason = serializers.CharField(read_only=True, help_text="A rejection's reason.")
    outcome = serializers.DictField(
        read_only=True,
        allow_null=True,
        help_text="approved: what the action did; failed: the refusal (`code`, `message`, "
        "`details`); expired: `{code: expired}`.",
    )
    created_at = serializers.DateTimeField(read_only=True)
    decided_at = serializers.DateTimeField(read_only=True, allow_null=True)
    expires_at = serializers.DateTimeField(read_only=True)

    @extend_schema_field(KeyRefSerializer)
    def get_requested_by(self, obj: Approval) -> dict | None:
        return _key_ref(obj.requested_by)

    @extend_schema_field(KeyRefSerializer(allow_null=True))
    def get_decided_by(self, obj: Approval) -> dict | None:
        return _key_ref(obj.decided_by)


class ApprovalFiltersSerializer(QueryFiltersSerializer):
    status = serializers.ChoiceField(choices=Approval.Status.choices, required=False)


class ApprovalRejectSerializer(StrictSerializer):
    reason = serializers.CharField(max_length=1000, required=False, allow_blank=True, default="")


def approval_data(approval: Approval) -> dict:
    """The approval's JSON, as GET /approvals/:id answers it (and events carry it)."""
    return dict(ApprovalSerializer(approval).data)


def approval_accepted(request, approval: Approval) -> Response:
    """202 with the approval that now holds a drafter's send; the request's audit row is
    the approval's request (`approval.request`), not the send it did not make."""
    audit_as(request, action="approval.request", resource_id=approval.pk)
    return Response(approval_data(approval), status=status.HTTP_202_ACCEPTED)
