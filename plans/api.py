"""HTTP API of plans (docs/billing.md, "GET /plans"): `GET /plans`, public (no key), the
plans a customer can buy, a thin view over plans.selectors."""

from drf_spectacular.utils import extend_schema
from rest_framework.permissions import AllowAny
from rest_framework.response import Response

from config.api.viewsets import ServiceAPIView
from plans.selectors import plan_list_purchasable
from plans.serializers import PlanSerializer


class PlanListView(ServiceAPIView):
    """Public, paid, non-archived plans by tier. Free, private and archived plans are omitted."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema(summary="List purchasable plans", responses=PlanSerializer(many=True), auth=[])
    def get(self, request):
        return Response(PlanSerializer(plan_list_purchasable(), many=True).data)
