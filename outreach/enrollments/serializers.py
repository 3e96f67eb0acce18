"""The enrollment as the API shows it: one representation, served by the campaigns API
(GET /campaigns/:id/enrollments, /enrollments/:id) and the contacts API (POST
/outreaches)."""

from typing import Any, cast

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from config.api.serializers import StrictModelSerializer
from outreach.api_fields import BlankAsNullChoiceField
from outreach.models.campaigns import CampaignStep
from outreach.models.sending import Enrollment


class EnrollmentSerializer(StrictModelSerializer):
    campaign_id = serializers.UUIDField(read_only=True)
    contact_id = serializers.UUIDField(read_only=True)
    contact_email = serializers.EmailField(source="contact.email", read_only=True)
    stop_reason = BlankAsNullChoiceField(choices=Enrollment.StopReason.choices, read_only=True)
    current_key = serializers.SerializerMethodField(
        help_text="The key of the element it sends or waits at next (a pending one: its "
        "campaign's first); null once it has ended."
    )
    path = serializers.ListField(
        child=serializers.CharField(),
        read_only=True,
        help_text="The keys of the elements it has passed, in order: sent steps and decided "
        "branches (not the one it waits at).",
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_current_key(self, obj) -> str | None:
        if obj.status == Enrollment.Status.PENDING:
            if hasattr(obj, "first_key"):  # annotated by the list's query
                return obj.first_key
            return self._first_key(obj.campaign_id)
        if obj.status not in Enrollment.DUE_STATUSES:
            return None
        return obj.current_key

    def _first_key(self, campaign_id) -> str | None:
        """The campaign's first key, read once per response (the context is shared by a
        list's items), and only when a pending enrollment asks."""
        context = cast(dict[str, Any], self.context)  # the root's own dict, shared
        cache = context.setdefault("first_keys", {})
        if campaign_id not in cache:
            cache[campaign_id] = (
                CampaignStep.objects.filter(campaign_id=campaign_id)
                .order_by("position")
                .values_list("key", flat=True)
                .first()
            )
        return cache[campaign_id]

    class Meta:
        model = Enrollment
        fields = [
            "id",
            "campaign_id",
            "contact_id",
            "contact_email",
            "status",
            "current_step",
            "current_key",
            "path",
            "next_send_at",
            "sent_at",
            "opened_at",
            "clicked_at",
            "replied_at",
            "bounce_reason",
            "bounce_type",
            "bounce_category",
            "unsubscribed_at",
            "stopped_at",
            "stop_reason",
            "variants",
            "last_error",
            "created_at",
        ]
        read_only_fields = fields
