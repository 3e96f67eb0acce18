"""HTTP API of the account's sending defaults: `GET /sending_defaults` and `PATCH
/sending_defaults` `{max_per_recipient_domain_per_day}` (docs/deliverability.md,
"Recipient domain cap")."""

from drf_spectacular.utils import extend_schema
from rest_framework.response import Response

from config.api.viewsets import ServiceAPIView
from outreach.domain_cap.serializers import SendingDefaultsSerializer
from outreach.domain_cap.services import sending_defaults_update


class SendingDefaultsView(ServiceAPIView):
    """The defaults of the account's campaigns: `max_per_recipient_domain_per_day`
    (null: no cap) applies to every campaign whose own is null."""

    audit_actions = {"patch": "sending_defaults.update"}

    @extend_schema(responses=SendingDefaultsSerializer)
    def get(self, request):
        return Response(SendingDefaultsSerializer(request.user).data)

    @extend_schema(request=SendingDefaultsSerializer, responses=SendingDefaultsSerializer)
    def patch(self, request):
        serializer = SendingDefaultsSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account = sending_defaults_update(account=request.user, data=serializer.validated_data)
        return Response(SendingDefaultsSerializer(account).data)
