"""HTTP API of campaigns (docs/outreach.md): thin views over services, and the one-call
outreach (`POST /outreaches`: a contact upserted, enrolled and dispatched). The thread of
an enrollment is conversations' API."""

from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status
from rest_framework.decorators import action
from rest_framework.response import Response

from accounts.idempotency import idempotent
from accounts.send_limits import key_sends_check
from accounts.verification import email_verified_check
from config.api.errors import ValidationFailed
from config.api.pagination import StartingAfterPagination
from config.api.viewsets import AccountScopedAPIView, AccountScopedViewSet, no_request_body
from outreach import enrollments
from outreach.approvals.serializers import ApprovalSerializer, approval_accepted
from outreach.approvals.services import approval_request, held_for_approval
from outreach.campaigns import dispatch, edits, followups, selectors, services, state, stopping
from outreach.campaigns.dispatch_preview import PREVIEW_CONTACTS_MAX, dispatch_preview
from outreach.campaigns.preview_serializers import DispatchPreviewSerializer
from outreach.campaigns.sending_status import UPCOMING_MAX, sending_status
from outreach.campaigns.serializers import (
    CampaignSerializer,
    CampaignStatsSerializer,
    DispatchSerializer,
    OutreachSerializer,
    SendingStatusSerializer,
)
from outreach.campaigns.step_serializers import (
    StepsPreviewResultSerializer,
    StepsPreviewSerializer,
)
from outreach.contacts import selectors as contacts_selectors
from outreach.contacts.data import InvalidContactData, contact_data_clean
from outreach.enrollments.serializers import EnrollmentSerializer
from outreach.errors import CampaignNotFound, EnrollmentNotActive
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment


def _campaign_response(campaign, *, status_code=status.HTTP_200_OK, context=None) -> Response:
    campaign = selectors.campaign_with_relations(campaign_id=campaign.pk)
    return Response(CampaignSerializer(campaign, context=context or {}).data, status=status_code)


class CampaignViewSet(
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    queryset = Campaign.objects.all()
    serializer_class = CampaignSerializer
    audit_actions = {
        "stop_enrollment": "enrollment.stop",
        "steps_preview": None,
        "dispatch_preview": None,
    }
    not_found_error = CampaignNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post", "patch", "delete"]

    # The list's page compiles these annotations once (config.api.pagination).
    page_extend = staticmethod(selectors.campaigns_with_relations)

    def get_queryset(self):
        queryset = super().get_queryset()
        if self.action == "retrieve":
            queryset = selectors.campaigns_with_relations(queryset)
        return queryset

    def get_serializer_context(self):
        return {**super().get_serializer_context(), "account": self.request.user}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.action == "dispatch_enrollments":
            email_verified_check(request.user)  # 403 until the signup address is proven

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        data = CampaignSerializer(page, many=True).data
        return self.get_paginated_response(data)

    @idempotent
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        campaign = services.campaign_create(account=request.user, data=serializer.validated_data)
        return _campaign_response(campaign, status_code=status.HTTP_201_CREATED)

    def perform_destroy(self, instance):
        # With the tombstones its sent emails' unsubscribe links need, and without the
        # follow-up rules that name it.
        followups.campaign_delete(account_id=instance.account_id, campaign_id=instance.pk)

    def partial_update(self, request, pk=None):
        campaign = self.get_object()
        serializer = self.get_serializer(campaign, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        campaign = services.campaign_update(campaign=campaign, data=serializer.validated_data)
        return _campaign_response(campaign)

    @extend_schema(
        request=DispatchSerializer,
        responses={
            200: inline_serializer(
                "DispatchResult",
                {"campaign_id": serializers.UUIDField(), "dispatched": serializers.IntegerField()},
            ),
            202: ApprovalSerializer,
        },
        description="A drafter key's dispatch is held: 202 with its approval, nothing sent "
        "(docs/agents.md).",
    )
    # Not named `dispatch`: that is APIView's request entry point.
    @action(detail=True, methods=["post"], url_path="dispatch", url_name="dispatch")
    def dispatch_enrollments(self, request, pk=None):
        campaign = self.get_object()
        serializer = DispatchSerializer(data=request.data, context={"account": request.user})
        serializer.is_valid(raise_exception=True)
        contact_ids = serializer.validated_data.get("contact_ids")
        if held_for_approval(request.auth):
            count = dispatch.dispatch_candidates_count(campaign=campaign, contact_ids=contact_ids)
            key_sends_check(api_key=request.auth, count=count)
            approval = approval_request(
                api_key=request.auth,
                action="dispatch",
                campaign_id=campaign.pk,
                contact_ids=contact_ids,
            )
            return approval_accepted(request, approval)
        dispatched = dispatch.campaign_dispatch(
            campaign=campaign, contact_ids=contact_ids, api_key=request.auth
        )
        return Response({"campaign_id": str(campaign.pk), "dispatched": dispatched})

    @extend_schema(
        request=DispatchSerializer,
        responses=DispatchPreviewSerializer,
        summary="Preview a dispatch",
        description="What POST /campaigns/:id/dispatch with the same body would do now: "
        "the contacts it would dispatch with each one's first send time (when step 1 is "
        "due, by the dispatch's own rule: the step's delay, then the send window's next "
        f"opening; the first {PREVIEW_CONTACTS_MAX} by address, `send_times` counts them "
        "all by time zone), the pending contacts the blocklist would stop, the named ones "
        "it would leave alone, and `refusal`: the error the dispatch would answer instead "
        "(its `status` and envelope), or null. Writes nothing; an invalid body answers the "
        "dispatch's 422.",
    )
    @action(detail=True, methods=["post"], url_path="dispatch/preview", url_name="dispatch-preview")
    def dispatch_preview(self, request, pk=None):
        campaign = self.get_object()
        serializer = DispatchSerializer(data=request.data, context={"account": request.user})
        serializer.is_valid(raise_exception=True)
        campaign.account = request.user  # the scope: its own account, already read
        answer = dispatch_preview(
            campaign=campaign,
            contact_ids=serializer.validated_data.get("contact_ids"),
            now=timezone.now(),
            api_key=request.auth,
        )
        return Response(DispatchPreviewSerializer(answer).data)

    @extend_schema(
        request=StepsPreviewSerializer,
        responses=StepsPreviewResultSerializer,
        summary="Preview an edit of the steps",
        description="What PATCH /campaigns/:id with the same steps would do to the "
        "enrollments on their way: for each removed element some enrollment waits at, "
        "where they go and how many. Writes nothing; invalid steps answer the PATCH's 422.",
    )
    @action(detail=True, methods=["post"], url_path="steps/preview", url_name="steps-preview")
    def steps_preview(self, request, pk=None):
        campaign = self.get_object()
        serializer = StepsPreviewSerializer(data=request.data, context={"campaign": campaign})
        serializer.is_valid(raise_exception=True)
        moves = edits.moves_plan(campaign=campaign, steps=serializer.validated_data["steps"])
        return Response({"moves": [move.as_json() for move in moves]})

    @no_request_body
    @extend_schema(request=None, responses=CampaignSerializer)
    @action(detail=True, methods=["post"])
    def pause(self, request, pk=None):
        campaign = state.campaign_pause(campaign=self.get_object())
        return _campaign_response(campaign)

    @no_request_body
    @extend_schema(request=None, responses=CampaignSerializer)
    @action(detail=True, methods=["post"])
    def resume(self, request, pk=None):
        campaign = state.campaign_resume(campaign=self.get_object())
        return _campaign_response(campaign)

    @extend_schema(
        responses=SendingStatusSerializer,
        summary="Why it is (not) sending",
        description="Per mailbox of the campaign: whether it can send now and, if not, "
        "every reason with the time it lifts; then the next planned sends (at most "
        f"{UPCOMING_MAX}) with the earliest time each may go out. A dry run of the "
        "scheduler: nothing is changed.",
    )
    @action(detail=True, methods=["get"], url_path="sending_status")
    def sending_status(self, request, pk=None):
        campaign = self.get_object()
        campaign.account = request.user  # the scope: its own account, already read
        answer = sending_status(campaign=campaign, now=timezone.now())
        return Response(SendingStatusSerializer(answer).data)

    @extend_schema(
        responses=EnrollmentSerializer(many=True),
        parameters=[
            OpenApiParameter("status", OpenApiTypes.STR, enum=[s.value for s in Enrollment.Status])
        ],
    )
    @action(detail=True, methods=["get"])
    def enrollments(self, request, pk=None):
        campaign = self.get_object()
        wanted = request.query_params.get("status", "")
        if wanted and wanted not in Enrollment.Status.values:
            raise ValidationFailed(
                {"status": [f"Must be one of {', '.join(Enrollment.Status.values)}."]}
            )
        page = self.paginate_queryset(
            selectors.campaign_enrollments(campaign=campaign, status=wanted)
        )
        return self.get_paginated_response(EnrollmentSerializer(page, many=True).data)

    @no_request_body
    @extend_schema(request=None, responses=EnrollmentSerializer)
    @action(
        detail=True,
        methods=["post"],
        url_path=r"enrollments/(?P<enrollment_id>[^/]+)/stop",
        url_name="enrollment-stop",
    )
    def stop_enrollment(self, request, pk=None, enrollment_id=None):
        campaign = self.get_object()
        enrollment = selectors.campaign_enrollment(campaign=campaign, enrollment_id=enrollment_id)
        if not stopping.enrollment_stop(enrollment_id=enrollment.pk):
            enrollment.refresh_from_db(fields=["status"])
            raise EnrollmentNotActive(
                f"The enrollment has already ended ({enrollment.status}).",
                details={"status": enrollment.status},
            )
        enrollment.refresh_from_db()
        return Response(EnrollmentSerializer(enrollment).data)

    @extend_schema(responses=CampaignStatsSerializer)
    @action(detail=True, methods=["get"])
    def stats(self, request, pk=None):
        campaign = self.get_object()
        body = enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]
        elements = list(campaign.steps.all())
        return Response(
            {
                "campaign_id": str(campaign.pk),
                **body,
                "steps": selectors.campaign_step_stats(campaign=campaign, elements=elements),
                "branches": selectors.campaign_branch_stats(campaign=campaign, elements=elements),
            }
        )


class OutreachView(AccountScopedAPIView):
    """The one-call path: upsert the contact, enroll it, dispatch that enrollment."""

    queryset = Campaign.objects.all()
    not_found_error = CampaignNotFound
    serializer_class = OutreachSerializer
    audit_actions = {"post": "outreach.create"}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method == "POST":
            email_verified_check(request.user)  # 403 until the signup address is proven

    @extend_schema(
        request=OutreachSerializer,
        responses={201: EnrollmentSerializer, 200: EnrollmentSerializer, 202: ApprovalSerializer},
        description="A drafter key's outreach is held: 202 with its approval, nothing sent "
        "(docs/agents.md).",
    )
    @idempotent
    def post(self, request):
        serializer = OutreachSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        campaign = contacts_selectors.requested_campaign(
            account=request.user, campaign_id=serializer.validated_data["campaign_id"]
        )
        assert campaign is not None  # campaign_id is required
        try:
            contact = contact_data_clean(serializer.validated_data["contact"])
        except InvalidContactData as exc:  # pragma: no cover - the serializer checked it
            raise ValidationFailed({f"contact.{exc.field_name}": [exc.message]}) from None
        if held_for_approval(request.auth):
            key_sends_check(api_key=request.auth, count=1)
            approval = approval_request(
                api_key=request.auth,
                action="outreach",
                campaign_id=campaign.pk,
                contact=dict(request.data["contact"]),
            )
            return approval_accepted(request, approval)
        enrollment, changed = dispatch.outreach_create(
            account=request.user, campaign=campaign, contact=contact, api_key=request.auth
        )
        return Response(
            EnrollmentSerializer(enrollment).data,
            status=status.HTTP_201_CREATED if changed else status.HTTP_200_OK,
        )
