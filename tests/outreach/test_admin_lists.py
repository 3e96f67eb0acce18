"""The admin's campaign and mailbox lists show their numbers (docs/admin.md): a campaign's
sent, opened and replied (its stats' shards summed), a mailbox's sent, bounce rate,
opened and replied (its analytics hours summed), in the list's queries, never a query
per row; long names are cut, whole in their tooltip."""

import re

import pytest
from django.urls import reverse

from outreach.analytics.fold import hours_fold
from outreach.models.analytics import AnalyticsHour
from outreach.models.campaigns import CampaignStats
from outreach.models.mailboxes import SmtpCredential
from tests.outreach.dashboard_data import AnalyticsHourFactory, hours_ago
from tests.outreach.factories import CampaignFactory

pytestmark = pytest.mark.django_db

CAMPAIGNS = reverse("admin:outreach_campaign_changelist")
MAILBOXES = reverse("admin:outreach_smtpcredential_changelist")


def _cells(page: str, column: str) -> list[str]:
    return re.findall(rf'<td class="field-{column}">(.*?)</td>', page, re.S)


def _campaign(n: int, *, name: str = ""):
    campaign = CampaignFactory(name=name or f"Campaign {n}")
    for shard in (0, 1):
        CampaignStats.objects.create(
            campaign=campaign, shard=shard, sent=10 * n + shard, opened=n + shard, replied=shard
        )
    return campaign


def test_the_campaign_list_shows_sent_opened_and_replied(admin_client):
    _campaign(3)
    CampaignFactory(name="Never sent")

    page = admin_client.get(CAMPAIGNS, {"o": "-3"}).content.decode()  # by sent, most first

    assert _cells(page, "sent_total") == ["61", "0"]  # 30 + 31
    assert _cells(page, "opened_total") == ["7", "0"]  # 3 + 4
    assert _cells(page, "replied_total") == ["1", "0"]


def test_a_long_campaign_name_is_cut_and_whole_in_its_tooltip(admin_client):
    name = "A campaign whose name goes on " + "and on " * 10
    _campaign(1, name=name)
    page = admin_client.get(CAMPAIGNS).content.decode()
    [cell] = re.findall(r'<th class="field-name_shown"><a [^>]*>(.*?)</a>', page)
    assert cell == f'<span title="{name}">{name[:39]}…</span>'  # 40 characters


def test_the_campaign_list_reads_the_same_queries_for_1_or_10_campaigns(
    admin_client, django_assert_num_queries, django_assert_max_num_queries
):
    _campaign(1)
    with django_assert_max_num_queries(50) as one:
        admin_client.get(CAMPAIGNS)
    for n in range(2, 11):
        _campaign(n)
    with django_assert_num_queries(len(one.captured_queries)):
        page = admin_client.get(CAMPAIGNS).content.decode()
    assert len(_cells(page, "sent_total")) == 10


def _mailbox(n: int) -> SmtpCredential:
    credential = _campaign(n).credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(sent_count=95, bounced_count=5)
    for hours in (1, 30):
        AnalyticsHourFactory(
            account=credential.account,
            grain=AnalyticsHour.Grain.CREDENTIAL,
            credential=credential,
            hour=hours_ago(hours),
            opened=n,
            replied=1,
        )
    # The account's own hour is counted there, not again for the mailbox.
    AnalyticsHourFactory(account=credential.account, opened=500, replied=500)
    return credential


def test_the_mailbox_list_shows_sent_bounce_rate_opened_and_replied(admin_client):
    credential = _mailbox(4)

    page = admin_client.get(MAILBOXES).content.decode()

    assert _cells(page, "sent") == ["95"]
    assert _cells(page, "bounce_rate") == ["5.0%"]
    assert _cells(page, "opened_total") == ["8"]
    assert _cells(page, "replied_total") == ["2"]
    assert credential.account.email in page  # under the address
    # The 30-hour-old row moved into its day by beat: the same totals, one from each table.
    hours_fold(before=hours_ago(2))
    moved = admin_client.get(MAILBOXES).content.decode()
    assert (_cells(moved, "opened_total"), _cells(moved, "replied_total")) == (["8"], ["2"])


def test_the_mailbox_list_reads_the_same_queries_for_1_or_10_mailboxes(
    admin_client, django_assert_num_queries, django_assert_max_num_queries
):
    _mailbox(1)
    with django_assert_max_num_queries(50) as one:
        admin_client.get(MAILBOXES)
    for n in range(2, 11):
        _mailbox(n)
    with django_assert_num_queries(len(one.captured_queries)):
        page = admin_client.get(MAILBOXES, {"o": "-7"}).content.decode()  # by opened
    assert _cells(page, "opened_total")[:2] == ["20", "18"]


def test_the_mailbox_list_says_why_a_mailbox_is_disabled_or_paused(admin_client):
    disabled, paused = _mailbox(1), _mailbox(2)
    _mailbox(3)  # sending
    SmtpCredential.objects.filter(pk=disabled.pk).update(
        disabled_at=hours_ago(1), disabled_reason=SmtpCredential.DisabledReason.MANUAL
    )
    SmtpCredential.objects.filter(pk=paused.pk).update(
        paused_at=hours_ago(1), paused_reason=SmtpCredential.PausedReason.COMPLAINT_RATE
    )

    page = admin_client.get(MAILBOXES, {"o": "-7"}).content.decode()  # by opened

    assert _cells(page, "stopped_because") == ["-", "paused: Complaint Rate", "Manual"]
    assert _cells(page, "opened_total") == ["6", "4", "2"]
