"""HTTP API of approvals, `/approvals` (docs/agents.md, "Approvals"): thin views over
outreach.approval_decisions.services."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.api import IDEMPOTENCY_KEY_PARAMETER
from accounts.idempotency import idempotent
from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedViewSet, no_request_body
from outreach.approval_decisions.services import approval_decide
from outreach.approvals.serializers import (
    ApprovalFiltersSerializer,
    ApprovalRejectSerializer,
    ApprovalSerializer,
    approval_data,
)
from outreach.errors import ApprovalNotFound
from outreach.models.approvals import Approval


class ApprovalViewSet(AccountScopedViewSet):
    queryset = Approval.objects.select_related("requested_by", "decided_by")
    serializer_class = ApprovalSerializer
    not_found_error = ApprovalNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post"]

    @extend_schema(
        summary="List approvals",
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=Approval.Status.values),
        ],
        responses=ApprovalSerializer(many=True),
    )
    def list(self, request):
        unknown = set(request.query_params) - {"status", "limit", "starting_after"}
        if unknown:
            raise ValidationFailed({name: ["Unknown parameter."] for name in sorted(unknown)})
        filters = ApprovalFiltersSerializer(data=request.query_params)
        if not filters.is_valid():
            raise ValidationFailed(filters.errors)
        queryset = self.get_queryset()
        if filters.validated_data.get("status"):
            queryset = queryset.filter(status=filters.validated_data["status"])
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ApprovalSerializer(page, many=True).data)

    @extend_schema(summary="An approval", responses=ApprovalSerializer)
    def retrieve(self, request, pk=None):
        return Response(approval_data(self.get_object()))

    @no_request_body
    @extend_schema(
        summary="Approve: run the held send",
        description="Runs the held send once, as it would run now (plan cap, suppression, "
        "blocklist and the requesting key's daily limit checked now): `approved` with what "
        "it did in `outcome`, or `failed` with what refused it. 409 approval_not_pending "
        "when it is not pending (nothing sent). Admin or sender keys. Accepts "
        "Idempotency-Key.",
        request=None,
        responses=ApprovalSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def approve(self, request, pk=None):
        approval = self.get_object()
        decided = approval_decide(
            account=request.user, approval_id=approval.pk, decider=request.auth, approve=True
        )
        return Response(approval_data(decided))

    @extend_schema(
        summary="Reject: nothing is sent",
        request=ApprovalRejectSerializer,
        responses=ApprovalSerializer,
        parameters=[IDEMPOTENCY_KEY_PARAMETER],
    )
    @action(detail=True, methods=["post"])
    @idempotent
    def reject(self, request, pk=None):
        approval = self.get_object()
        serializer = ApprovalRejectSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        decided = approval_decide(
            account=request.user,
            approval_id=approval.pk,
            decider=request.auth,
            approve=False,
            reason=serializer.validated_data["reason"],
        )
        return Response(approval_data(decided))
