"""RepresentationMixin: the same representation as DRF's, without per-use field copies."""

from django.utils import timezone
from rest_framework import serializers

from accounts.serializers import ApiKeyCreatedSerializer, ApiKeySerializer
from accounts.services import api_key_create
from config.api.serializers import RepresentationMixin


def _drf(serializer_class, instance) -> dict:
    return serializers.Serializer.to_representation(serializer_class(), instance)


def test_api_keys_are_represented_as_drf_represents_them(account):
    active = api_key_create(account=account, label="active").api_key
    revoked = api_key_create(account=account, label="revoked").api_key
    revoked.revoked_at = timezone.now()
    revoked.last_used_at = timezone.now()
    revoked.save()
    for key in (active, revoked):
        assert ApiKeySerializer(key).data == _drf(ApiKeySerializer, key)
    represented = ApiKeySerializer([active, revoked], many=True).data
    assert [item["status"] for item in represented] == ["active", "revoked"]
    assert represented[0]["last_used_at"] is None


def test_each_serializer_class_has_its_own_fields(account):
    issued = api_key_create(account=account, label="new")
    key = issued.api_key
    key.plaintext = issued.plaintext
    assert "plaintext" not in ApiKeySerializer(key).data
    created = ApiKeyCreatedSerializer(key).data
    assert created["plaintext"] == issued.plaintext
    assert created == _drf(ApiKeyCreatedSerializer, key)


def test_write_only_fields_and_skipped_attributes_stay_out():
    class Thing(RepresentationMixin, serializers.Serializer):
        name = serializers.CharField()
        secret = serializers.CharField(write_only=True)
        missing = serializers.CharField(required=False)  # absent from a dict: skipped
        empty = serializers.CharField(allow_null=True)

    instance = {"name": "a", "secret": "s", "empty": None}
    assert Thing(instance).data == {"name": "a", "empty": None}
    assert Thing(instance).data == _drf(Thing, instance)
