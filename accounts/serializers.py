"""Serializers of the accounts API: signup, email verification and API keys
(docs/accounts.md)."""

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
    status = serializers.SerializerMethodField(help_text="`active` or `revoked`.")
    created_at = serializers.DateTimeField(read_only=True)
    last_used_at = serializers.DateTimeField(read_only=True, allow_null=True)
    revoked_at = serializers.DateTimeField(read_only=True, allow_null=True)

    def get_status(self, obj: ApiKey) -> str:
        return "active" if obj.is_active else "revoked"


class ApiKeyCreatedSerializer(ApiKeySerializer):
    plaintext = serializers.CharField(
        read_only=True, help_text="The full key. Shown only in this response."
    )


class ApiKeyCreateSerializer(StrictSerializer):
    label = serializers.CharField(max_length=200)  # type: ignore[assignment]  # as above
    client_kind = serializers.ChoiceField(
        choices=ApiKey.ClientKind.choices, default=ApiKey.ClientKind.DIRECT
    )
