"""Serializers of the accounts API: signup, email verification and API keys
(docs/accounts.md)."""

from django.utils import timezone
from rest_framework import serializers

from accounts.models import ApiKey
from config.api.serializers import RepresentationMixin, StrictSerializer


class SignupSerializer(StrictSerializer):
    email = serializers.EmailField(max_length=254)
    name = serializers.CharField(max_length=200, required=False, allow_blank=True, default="")


class SignupKeySerializer(StrictSerializer):
    id = serializers.UUIDField()
    prefix = serializers.CharField()
    plaintext = serializers.CharField(help_text="The full key. Shown only in this response.")


class SignupResultSerializer(StrictSerializer):
    account_id = serializers.UUIDField()
    plan_slug = serializers.CharField()
    api_key = SignupKeySerializer()


class EmailVerificationSerializer(StrictSerializer):
    email = serializers.EmailField(help_text="The signup address, where the link goes.")
    email_verified = serializers.BooleanField()
    email_verified_at = serializers.DateTimeField(allow_null=True)
    verification_required = serializers.BooleanField(
        help_text="Whether this service needs the address proven before dispatch and "
        "outreach (SIGNUP_EMAIL_VERIFICATION)."
    )


class EmailVerificationSentSerializer(EmailVerificationSerializer):
    verification_sent = serializers.BooleanField(
        help_text="False when the address is proven already: nothing is sent."
    )


class ApiKeySerializer(RepresentationMixin, StrictSerializer):
    # Declared fields, not a ModelSerializer (it introspects the model on each use),
    # and shared bound fields (RepresentationMixin): GET /api_keys's hot path.
    id = serializers.UUIDField(read_only=True)
    prefix = serializers.CharField(read_only=True, help_text="First 12 characters; safe to log.")
    # A field named like Field.label, which djangorestframework-stubs type as a string.
    label = serializers.CharField(read_only=True)  # type: ignore[assignment]
    client_kind = serializers.ChoiceField(choices=ApiKey.ClientKind.choices, read_only=True)
    role = serializers.ChoiceField(choices=ApiKey.Role.choices, read_only=True)
    daily_send_limit = serializers.IntegerField(read_only=True, allow_null=True)
    expires_at = serializers.DateTimeField(read_only=True, allow_null=True)
    status = serializers.SerializerMethodField(help_text="`active`, `revoked` or `expired`.")
    created_at = serializers.DateTimeField(read_only=True)
    last_used_at = serializers.DateTimeField(read_only=True, allow_null=True)
    revoked_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def get_status(self, obj: ApiKey) -> str:
        if obj.revoked_at is not None:
            return "revoked"
        return "expired" if obj.is_expired else "active"


class ApiKeyCreatedSerializer(ApiKeySerializer):
    plaintext = serializers.CharField(
        read_only=True, help_text="The full key. Shown only in this response."
    )


class ApiKeyCreateSerializer(StrictSerializer):
    label = serializers.CharField(max_length=200)  # type: ignore[assignment]  # as above
    client_kind = serializers.ChoiceField(
        choices=ApiKey.ClientKind.choices, default=ApiKey.ClientKind.DIRECT
    )
    role = serializers.ChoiceField(choices=ApiKey.Role.choices, default=ApiKey.Role.ADMIN)
    daily_send_limit = serializers.IntegerField(
        min_value=0,
        max_value=1_000_000,
        allow_null=True,
        default=None,
        help_text="Contacts the key may dispatch, enrol or answer per UTC day; null: no limit.",
    )
    expires_at = serializers.DateTimeField(
        allow_null=True, default=None, help_text="In the future; after it the key is refused."
    )

    def validate_expires_at(self, value):
        if value is not None and value <= timezone.now():
            raise serializers.ValidationError("Must be in the future.")
        return value
