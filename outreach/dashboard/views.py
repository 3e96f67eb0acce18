"""The staff dashboard page (`/admin/dashboard/`): the platform's sends per day, the
busiest accounts and the accounts over the bounce or complaint line (selectors.py), as
SVG charts drawn here and tables linking each account to its admin page."""

from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.template.response import TemplateResponse
from django.urls import reverse

from config.charts import bar_chart, hbar_chart, line_chart
from outreach.dashboard import selectors


def _linked(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each account row with the address of its admin page."""
    return [
        {**row, "url": reverse("admin:accounts_account_change", args=[row["account_id"]])}
        for row in rows
    ]


def dashboard_view(request: HttpRequest) -> TemplateResponse:
    """Staff who may view accounts see every account's numbers here."""
    if not request.user.has_perm("accounts.view_account"):
        raise PermissionDenied
    start = selectors.window_start()
    days = selectors.platform_days(start=start)
    labels = [day.day.strftime("%m-%d") for day in days]
    busiest = _linked(selectors.busiest_accounts(start=start))
    context = {
        **admin.site.each_context(request),
        "title": "Staff dashboard",
        "start": start.date(),
        "days": selectors.DAYS,
        "busy_days": selectors.BUSY_DAYS,
        "total_sent": sum(day.sent for day in days),
        "sends_chart": bar_chart(
            title=f"Sends per day (UTC), last {selectors.DAYS} days",
            labels=labels,
            values=[day.sent for day in days],
        ),
        "trouble_chart": line_chart(
            title="Bounces and complaints per day",
            labels=labels,
            series=[
                ("Bounces", [day.bounced for day in days]),
                ("Complaints", [day.complaints for day in days]),
            ],
        ),
        "busiest_chart": hbar_chart(
            title=f"Busiest accounts: sends, last {selectors.DAYS} days",
            labels=[row["account__email"] for row in busiest],
            values=[row["sends"] for row in busiest],
        ),
        "busiest": busiest,
        "over_lines": _linked(selectors.accounts_over_lines(start=start)),
        "bounce_line": selectors.BOUNCE_RATE_LINE_PERCENT,
        "complaint_line": selectors.COMPLAINT_RATE_LINE_PERCENT,
        "min_attempts": selectors.MIN_ATTEMPTS,
        "over_line_shown": selectors.OVER_LINE_SHOWN,
    }
    return TemplateResponse(request, "admin/dashboard.html", context)
