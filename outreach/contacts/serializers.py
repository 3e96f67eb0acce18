"""Serializers of the contacts API: contacts and contact imports (docs/outreach.md)."""

from rest_framework import serializers

from config.api.serializers import StrictModelSerializer, StrictSerializer
from outreach.api_fields import TimezoneNameField, email_value_validate
from outreach.contacts.data import fields_errors
from outreach.models.contacts import Contact, ContactImport

# --- Contacts --------------------------------------------------------------------------


def _custom_fields_validator(value):
    problem = fields_errors(value)
    if problem:
        raise serializers.ValidationError(problem)
    return value


class CustomFieldsMixin(StrictSerializer):
    """Adds the `fields` object. It cannot be a class attribute: Serializer.fields is DRF's."""

    def get_fields(self):
        declared = super().get_fields()
        declared["fields"] = serializers.JSONField(
            required=False, validators=[_custom_fields_validator]
        )
        return declared


class ContactSerializer(CustomFieldsMixin, StrictModelSerializer):
    email = serializers.CharField(max_length=254)
    timezone = TimezoneNameField(
        help_text="IANA name (e.g. Asia/Tokyo): campaigns with send_in_contact_timezone "
        "read their send window in it. null: the campaign's time zone."
    )

    class Meta:
        model = Contact
        fields = [
            "id",
            "created_at",
            "email",
            "first_name",
            "last_name",
            "company",
            "fields",
            "timezone",
            "unsubscribed_at",
            "bounced_at",
        ]
        read_only_fields = ["id", "created_at", "unsubscribed_at", "bounced_at"]

    def validate_email(self, value):
        return email_value_validate(value)


# --- Contact imports -------------------------------------------------------------------


class ContactImportSerializer(StrictModelSerializer):
    campaign_id = serializers.UUIDField(read_only=True, allow_null=True)
    failure_reason = serializers.SerializerMethodField()

    class Meta:
        model = ContactImport
        fields = [
            "id",
            "created_at",
            "completed_at",
            "campaign_id",
            "status",
            "source_format",
            "filename",
            "total_rows",
            "processed_rows",
            "created_count",
            "updated_count",
            "skipped_count",
            "errors",
            "failure_reason",
        ]
        read_only_fields = fields

    def get_failure_reason(self, obj) -> str | None:
        return obj.failure_reason or None


def _campaign_id_field():
    return serializers.UUIDField(required=False, allow_null=True)


class ContactImportJsonSerializer(StrictSerializer):
    contacts = serializers.ListField(child=serializers.JSONField(), allow_empty=False)
    campaign_id = _campaign_id_field()


class _FormUUIDField(serializers.UUIDField):
    """DRF drops an empty optional form field as if it were absent; here it is
    validated like any other value (an empty string is not a UUID)."""

    def get_value(self, dictionary):
        return dictionary.get(self.field_name, serializers.empty)


class ContactImportUploadSerializer(StrictSerializer):
    file = serializers.FileField(
        allow_empty_file=True, help_text="CSV, UTF-8 text, with a header row naming `email`."
    )
    # A form field is a string: an empty one is not "no campaign" (leave it out).
    campaign_id = _FormUUIDField(required=False)

    def validate_file(self, upload):
        head = upload.read()
        upload.seek(0)
        if b"\x00" in head:
            raise serializers.ValidationError("Must be a CSV file: this one holds NUL bytes.")
        try:
            head.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise serializers.ValidationError(
                f"Must be a CSV file in UTF-8 (invalid byte at offset {exc.start}). "
                "Save it as CSV UTF-8."
            ) from None
        return upload
