"""The enrollment as the API shows it: one representation, served by the campaigns API
(GET /campaigns/:id/enrollments, /enrollments/:id) and the contacts API (POST
/outreaches)."""

from rest_framework import serializers

from config.api.serializers import StrictModelSerializer
from outreach.api_fields import BlankAsNullChoiceField
from outreach.models.sending import Enrollment


class EnrollmentSerializer(StrictModelSerializer):
    campaign_id = serializers.UUIDField(read_only=True)
    contact_id = serializers.UUIDField(read_only=True)
    contact_email = serializers.EmailField(source="contact.email", read_only=True)
    stop_reason = BlankAsNullChoiceField(choices=Enrollment.StopReason.choices, read_only=True)

    class Meta:
        model = Enrollment
        fields = [
            "id",
            "campaign_id",
            "contact_id",
            "contact_email",
            "status",
            "current_step",
            "next_send_at",
            "sent_at",
            "opened_at",
            "clicked_at",
            "replied_at",
            "bounce_reason",
            "unsubscribed_at",
            "stopped_at",
            "stop_reason",
            "variants",
            "last_error",
            "created_at",
        ]
        read_only_fields = fields
