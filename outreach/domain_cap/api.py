"""HTTP API of the account's sending defaults: `GET /sending_defaults` and `PATCH
/sending_defaults` `{max_per_recipient_domain_per_day}` (docs/deliverability.md,
"Recipient domain cap")."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response

from accounts.models import Account
from config.api.serializers import StrictSerializer
from config.api.viewsets import ServiceAPIView

# The highest cap accepted (a day's sends to one domain), on campaigns and accounts.
CAP_MAX = 100_000


def cap_field() -> serializers.IntegerField:
    return serializers.IntegerField(required=False, allow_null=True, min_value=1, max_value=CAP_MAX)


class SendingDefaultsSerializer(StrictSerializer):
    max_per_recipient_domain_per_day = cap_field()


def sending_defaults_update(*, account: Account, data: dict) -> Account:
    """Set the account's sending defaults given in `data` (the others stay)."""
    if "max_per_recipient_domain_per_day" in data:
        account.max_per_recipient_domain_per_day = data["max_per_recipient_domain_per_day"]
        Account.objects.filter(pk=account.pk).update(
            max_per_recipient_domain_per_day=account.max_per_recipient_domain_per_day
        )
    return account


class SendingDefaultsView(ServiceAPIView):
    """The defaults of the account's campaigns: `max_per_recipient_domain_per_day`
    (null: no cap) applies to every campaign whose own is null."""

    @extend_schema(responses=SendingDefaultsSerializer)
    def get(self, request):
        return Response(SendingDefaultsSerializer(request.user).data)

    @extend_schema(request=SendingDefaultsSerializer, responses=SendingDefaultsSerializer)
    def patch(self, request):
        serializer = SendingDefaultsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account = sending_defaults_update(account=request.user, data=serializer.validated_data)
        return Response(SendingDefaultsSerializer(account).data)
