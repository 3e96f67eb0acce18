"""The test clock of a simulated campaign (docs/sandbox.md, "Test clock"):
`POST /campaigns/:id/advance` moves every wait of the campaign that many minutes
earlier, as if the time had passed, then rings the send scheduler so what fell due goes
at once. Only for a campaign whose mailboxes are all simulators: a real send is never
moved."""

from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone
from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.serializers import StrictSerializer
from config.api.viewsets import AccountScopedAPIView
from outreach.campaigns.dispatch import sends_schedule_soon
from outreach.campaigns.simulated import real_credential_ids
from outreach.errors import CampaignNotFound, CampaignNotSimulated
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment

# A leap year of minutes: the longest move one call makes.
ADVANCE_MAX_MINUTES = 527_040

# The enrollment's waits the clock moves: its next send (a next step, a retry, a return
# from an out-of-office, the next opening of a window or of a day), the deadline of the
# branch it waits at, and an out-of-office return met at a branch.
ENROLLMENT_WAITS = ("next_send_at", "branch_deadline", "held_until")


def campaign_advance(*, campaign: Campaign, minutes: int, now: datetime | None = None) -> int:
    """Move the campaign's waits (those still ahead of `now`) and the pace of its
    simulator mailboxes `minutes` earlier; the number of waits moved. 409
    campaign_not_simulated unless its mailboxes are all simulators (and it has one);
    0 for a draft or a completed campaign."""
    now = now or timezone.now()
    delta = timedelta(minutes=minutes)
    with transaction.atomic():
        # Serialises with a change of its mailboxes and with its dispatches.
        campaign = Campaign.objects.select_for_update(no_key=True).get(pk=campaign.pk)
        real = real_credential_ids(campaign.pk)
        if real is None or real:
            raise CampaignNotSimulated(
                details={"real_credential_ids": [str(pk) for pk in real or []]}
            )
        if campaign.status in (Campaign.Status.DRAFT, Campaign.Status.COMPLETED):
            return 0
        waiting = Enrollment.objects.filter(campaign=campaign, status__in=Enrollment.DUE_STATUSES)
        moved = 0
        for name in ENROLLMENT_WAITS:
            moved += waiting.filter(**{f"{name}__gt": now}).update(
                **{name: F(name) - delta, "updated_at": now}
            )
        moved += SmtpCredential.objects.filter(
            campaigns=campaign,
            auth_method=SmtpCredential.AuthMethod.SIMULATOR,
            next_send_earliest_at__gt=now,
        ).update(next_send_earliest_at=F("next_send_earliest_at") - delta)
        if moved:
            transaction.on_commit(sends_schedule_soon, robust=True)
    return moved


class AdvanceSerializer(StrictSerializer):
    minutes = serializers.IntegerField(
        min_value=1,
        max_value=ADVANCE_MAX_MINUTES,
        help_text="How far the campaign's clock moves, 1 to 527,040 (a leap year).",
    )


class CampaignAdvanceView(AccountScopedAPIView):
    """POST /campaigns/:id/advance: the test clock."""

    queryset = Campaign.objects.all()
    not_found_error = CampaignNotFound
    serializer_class = AdvanceSerializer
    audit_actions = {"post": "campaign.advance"}

    @extend_schema(
        request=AdvanceSerializer,
        responses=inline_serializer(
            "AdvanceResult",
            {"campaign_id": serializers.UUIDField(), "moved": serializers.IntegerField()},
        ),
        summary="Advance a simulated campaign's clock",
        description="Moves every wait of the campaign still ahead (next sends, retries, "
        "out-of-office returns, branch deadlines, its simulator mailboxes' pace) `minutes` "
        "earlier, as if the time had passed, and rings the send scheduler. `moved`: the "
        "waits moved (0 for a draft or completed campaign). 409 `campaign_not_simulated` "
        "unless every mailbox of the campaign is a simulator. Accepts Idempotency-Key.",
    )
    @idempotent
    def post(self, request, pk=None):
        campaign = self.get_object()
        serializer = AdvanceSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        moved = campaign_advance(campaign=campaign, minutes=serializer.validated_data["minutes"])
        return Response({"campaign_id": str(campaign.pk), "moved": moved})
