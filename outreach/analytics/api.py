"""`GET /analytics` (API.md 21, docs/analytics.md): the account's counters over time,
read from the hourly rows kept on write (outreach.analytics.selectors)."""

from datetime import date, timedelta
from zoneinfo import ZoneInfo

from django.db.models import Exists, OuterRef
from django.utils import timezone
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework.response import Response

from config.api.errors import ValidationFailed
from config.api.viewsets import ServiceAPIView
from outreach.analytics.selectors import INTERVALS, Scope, series_read
from outreach.analytics.serializers import (
    MAX_RANGE_DAYS,
    AnalyticsQuerySerializer,
    AnalyticsSerializer,
    counts_shown,
)
from outreach.errors import CampaignNotFound, CredentialNotFound
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential

# The default range: the 30 days to today.
DEFAULT_DAYS = 30


class AnalyticsView(ServiceAPIView):
    @extend_schema(
        summary="Counters over time",
        parameters=[
            OpenApiParameter("from", OpenApiTypes.DATE, description="First date (local)."),
            OpenApiParameter("to", OpenApiTypes.DATE, description="Last date (local)."),
            OpenApiParameter("interval", OpenApiTypes.STR, enum=INTERVALS),
            OpenApiParameter("timezone", OpenApiTypes.STR, description="IANA name."),
            OpenApiParameter("campaign_id", OpenApiTypes.UUID),
            OpenApiParameter("credential_id", OpenApiTypes.UUID),
            OpenApiParameter("step_key", OpenApiTypes.STR, description="Needs campaign_id."),
        ],
        responses=AnalyticsSerializer,
    )
    def get(self, request):
        query = AnalyticsQuerySerializer(data=request.query_params)
        if not query.is_valid():
            raise ValidationFailed(query.errors)
        params = query.validated_data
        zone = params["timezone"]
        start, end = _dates(params, ZoneInfo(zone))
        scope = _scope(request.user, params)
        rows = series_read(
            scope=scope, start=start, end=end, interval=params["interval"], zone=zone
        )
        totals = [sum(column) for column in tuple(zip(*rows, strict=True))[1:]]
        # Each date as its text here: the JSON encoder's hook per date cost a year more.
        return Response(
            {
                "interval": params["interval"],
                "timezone": zone,
                "series": [{"date": row[0].isoformat(), **counts_shown(row[1:])} for row in rows],
                "totals": counts_shown(totals),
            }
        )


def _dates(params: dict, zone: ZoneInfo) -> tuple[date, date]:
    """The range asked for, or its defaults: `to` today in the zone (with `from` alone:
    today, kept within MAX_RANGE_DAYS after it and not before it), `from` the 30 days
    to `to`."""
    start, end = params.get("from"), params.get("to")
    if end is None:
        end = timezone.now().astimezone(zone).date()
        if start is not None:
            end = min(max(end, start), start + timedelta(days=MAX_RANGE_DAYS))
    if start is None:
        start = end - timedelta(days=DEFAULT_DAYS - 1)
    return start, end


def _scope(account, params: dict) -> Scope:
    """The grain the filters name, each id checked against the account (another
    account's id is its 404, as an unknown one): one query."""
    campaign_id, credential_id = params.get("campaign_id"), params.get("credential_id")
    step_key = params.get("step_key", "")
    if campaign_id is not None:
        steps = CampaignStep.objects.filter(campaign=OuterRef("pk"), key=step_key)
        found = (
            Campaign.objects.filter(pk=campaign_id, account=account)
            .annotate(has_step=Exists(steps))
            .values_list("has_step", flat=True)
            .first()
        )
        if found is None:
            raise CampaignNotFound()
        if step_key and not found:
            raise ValidationFailed({"step_key": ["No step of the campaign has this key."]})
    if credential_id is not None:
        credentials = SmtpCredential.objects.filter(pk=credential_id, account=account)
        if not credentials.exists():
            raise CredentialNotFound()
    return Scope(
        account_id=account.pk,
        campaign_id=campaign_id,
        credential_id=credential_id,
        step_key=step_key,
    )
