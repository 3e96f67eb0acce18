"""The staff dashboard (`/admin/dashboard/`, docs/admin.md): the platform's sends per day,
the busiest accounts and the accounts over the bounce or complaint line, from the
account-grain analytics hours with simulated traffic left out, as SVG drawn on the
server; a fixed number of queries however many accounts."""

import re
import xml.etree.ElementTree as ET
from datetime import UTC

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse
from django.utils import timezone

from outreach.analytics.fold import hours_fold
from outreach.dashboard import selectors
from outreach.models.analytics import AnalyticsDay, AnalyticsHour
from tests.accounts.factories import AccountFactory
from tests.outreach.dashboard_data import AnalyticsHourFactory, hours_ago

pytestmark = pytest.mark.django_db

URL = "/admin/dashboard/"


def _page(client) -> str:
    response = client.get(URL)
    assert response.status_code == 200
    return response.content.decode()


def _section(page: str, section_id: str) -> str:
    return page.split(f'id="{section_id}"', 1)[1].split('<div class="module"', 1)[0]


def _svgs(page: str) -> list[ET.Element]:
    found = re.findall(r'<div class="chart"[^>]*>(<svg .*?</svg>)', page, re.S)
    return [ET.fromstring(svg) for svg in found]  # noqa: S314 - our own markup, to check it


def _bar_values(svg: ET.Element) -> list[str]:
    """The bars' tooltips: 'label: value' (yesterday's bar is the one before today's)."""
    ns = "{http://www.w3.org/2000/svg}"
    return [
        rect.find(f"{ns}title").text
        for rect in svg.iter(f"{ns}rect")
        if rect.find(f"{ns}title") is not None
    ]


def test_it_shows_the_platforms_sends_per_day_without_simulated_traffic(admin_client):
    busy = AccountFactory(email="busy@example.com")
    AnalyticsHourFactory(account=busy, hour=hours_ago(0), sent=40)
    AnalyticsHourFactory(account=busy, hour=hours_ago(24), sent=25)
    AnalyticsHourFactory(account=AccountFactory(), hour=hours_ago(0), sent=2)
    # Left out: simulated traffic, other grains (counted again per campaign), older days.
    AnalyticsHourFactory(account=busy, hour=hours_ago(0), sent=1000, simulated=True)
    AnalyticsHourFactory(account=busy, hour=hours_ago(0), sent=500, grain="campaign")
    AnalyticsHourFactory(account=busy, hour=hours_ago(24 * 31), sent=700)

    page = _page(admin_client)

    assert "67 sends" in page  # 40 + 25 + 2
    sends = _svgs(_section(page, "sends-per-day"))[0]
    bars = _bar_values(sends)
    assert len(bars) == selectors.DAYS  # every day of the window, zeros included
    today = timezone.now().astimezone(UTC).strftime("%m-%d")
    assert bars[-1] == f"{today}: 42"
    assert bars[-2].endswith(": 25") and all(bar.endswith(": 0") for bar in bars[:-2])

    # Beat moves the past hours into their days: the page says the same.
    hours_fold(before=timezone.now())
    assert AnalyticsDay.objects.exists()
    moved = _page(admin_client)
    assert "67 sends" in moved
    assert _bar_values(_svgs(_section(moved, "sends-per-day"))[0]) == bars


def test_it_lists_the_busiest_accounts_with_their_last_7_and_30_days(admin_client):
    big = AccountFactory(email="big@example.com")
    AnalyticsHourFactory(account=big, hour=hours_ago(24 * 20), sent=900)
    AnalyticsHourFactory(account=big, hour=hours_ago(2), sent=100)
    small = AccountFactory(email="small@example.com")
    AnalyticsHourFactory(account=small, hour=hours_ago(2), sent=300)
    idle = AccountFactory(email="idle@example.com")
    AnalyticsHourFactory(account=idle, hour=hours_ago(2), opened=5)

    section = _section(_page(admin_client), "busiest")

    rows = re.findall(
        r"<tr>\s*<td><a href=\"([^\"]+)\">([^<]+)</a></td>\s*<td>(\d+)</td>\s*<td>(\d+)</td>",
        section,
    )
    assert rows == [
        (reverse("admin:accounts_account_change", args=[big.pk]), "big@example.com", "100", "1000"),
        (
            reverse("admin:accounts_account_change", args=[small.pk]),
            "small@example.com",
            "300",
            "300",
        ),
    ]
    assert "idle@example.com" not in section


def test_it_names_the_accounts_over_the_bounce_or_complaint_line(admin_client):
    bouncing = AccountFactory(email="bouncing@example.com")  # 6 of 100 attempts: 6% > 5%
    AnalyticsHourFactory(account=bouncing, sent=94, bounced_hard=4, bounced_block=2)
    at_line = AccountFactory(email="at-line@example.com")  # 5 of 100: not strictly above
    AnalyticsHourFactory(account=at_line, sent=95, bounced_soft=5)
    complained = AccountFactory(email="complained@example.com")  # 4 of 1000: 0.4% > 0.3%
    AnalyticsHourFactory(account=complained, sent=1000, complaints=4)
    few = AccountFactory(email="few@example.com")  # 2 of 4: under MIN_ATTEMPTS
    AnalyticsHourFactory(account=few, sent=2, bounced_hard=2)
    simulated = AccountFactory(email="simulated@example.com")
    AnalyticsHourFactory(account=simulated, sent=50, bounced_hard=50, simulated=True)

    section = _section(_page(admin_client), "over-lines")

    found = re.findall(r'<a href="([^"]+)">([^<]+)</a>', section)
    assert found == [
        (reverse("admin:accounts_account_change", args=[bouncing.pk]), "bouncing@example.com"),
        (reverse("admin:accounts_account_change", args=[complained.pk]), "complained@example.com"),
    ]
    assert "<strong>6.00%</strong>" in section and "<strong>0.40%</strong>" in section
    assert "above 5.0%" in section and "above 0.3%" in section


def test_what_accounts_send_is_escaped_in_the_charts_and_tables(admin_client):
    account = AccountFactory(email='x"><script>alert(1)</script>@example.com')
    AnalyticsHourFactory(account=account, sent=30)

    page = _page(admin_client)

    assert "<script>" not in page
    svgs = _svgs(page)
    assert len(svgs) == 3  # sends, bounces and complaints, the busiest accounts
    for svg in svgs:  # each chart is well-formed XML
        assert svg.tag == "{http://www.w3.org/2000/svg}svg"
    assert "&lt;script&gt;" in page


def test_nothing_is_loaded_from_elsewhere(admin_client):
    page = _page(admin_client)
    assert not re.findall(r'(?:src|href)="(?:https?:)?//', page)
    dashboard = page.split('id="content-main"', 1)[1]
    assert "<script" not in dashboard and "<link" not in dashboard


def test_the_same_queries_for_one_account_or_many(admin_client, django_assert_num_queries):
    AnalyticsHourFactory(sent=10)
    with django_assert_num_queries(5) as one:  # session, user, and the three reads
        _page(admin_client)
    for n in range(30):
        AnalyticsHourFactory(sent=100 + n, bounced_hard=n, complaints=n % 3)
    with django_assert_num_queries(len(one.captured_queries)):
        _page(admin_client)
    reads = [q["sql"] for q in one.captured_queries if "outreach_analyticsutcday" in q["sql"]]
    assert len(reads) == 3


def test_the_index_links_to_it_and_it_needs_a_staff_member_who_may_view_accounts(
    client, admin_client
):
    assert f'href="{URL}"' in admin_client.get(reverse("admin:index")).content.decode()

    anonymous = client.get(URL)
    assert anonymous.status_code == 302 and anonymous["Location"].startswith("/admin/login/")

    staff = User.objects.create_user("staff", password="pw-staff-1", is_staff=True)
    client.force_login(staff)
    assert client.get(URL).status_code == 403
    assert f'href="{URL}"' not in client.get(reverse("admin:index")).content.decode()

    staff.user_permissions.add(Permission.objects.get(codename="view_account"))
    assert client.get(URL).status_code == 200


def test_an_empty_platform_says_so(admin_client):
    page = _page(admin_client)
    assert "0 sends" in page
    assert "No sends in the last 30 days." in page
    assert "No account is over a line." in page
    assert AnalyticsHour.objects.count() == 0
