"""The scheduler's blockers (outreach.mailboxes.blockers), one set of rules for two
readers: for every blocker code the scheduler gives the mailbox no claim, and
GET /campaigns/:id/sending_status names it; and the scheduler's SQL filter of the
mailboxes that may send (`_mailbox_free`) says what the rules say."""

from datetime import UTC, datetime, timedelta

import pytest

from outreach.campaigns.sending_status import sending_status
from outreach.mailboxes.blockers import CODES, MailboxFacts, mailbox_blockers, mailbox_usable
from outreach.models.campaigns import Campaign
from outreach.models.domain_cap import RecipientDomainCount
from outreach.models.domains import SenderDomainCheck
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import SendClaim
from outreach.sending.scheduler import _mailbox_free, schedule_due
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)

pytestmark = pytest.mark.django_db

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TUESDAY = datetime(2026, 3, 3, tzinfo=UTC)


def _mailbox(campaign) -> SmtpCredential:
    return campaign.credentials.get()


def _update(campaign, **fields) -> None:
    SmtpCredential.objects.filter(campaigns=campaign).update(**fields)


def _completed(campaign):
    Campaign.objects.filter(pk=campaign.pk).update(status="completed")


def _paused(campaign):
    Campaign.objects.filter(pk=campaign.pk).update(status="paused", paused_reason="manual")


def _disabled(campaign):
    _update(campaign, disabled_at=NOW - timedelta(hours=1), disabled_reason="manual")


def _complaints(campaign):
    _update(campaign, paused_at=NOW - timedelta(hours=1))


def _reauthorization(campaign):
    _update(campaign, auth_method="oauth_google", oauth_status="reauthorization_required")


def _unauthenticated(campaign):
    Campaign.objects.filter(pk=campaign.pk).update(require_authenticated_domain=True)
    SenderDomainCheck.objects.create(
        credential=_mailbox(campaign),
        domain="example.com",
        status="error",
        findings=[{"code": "dmarc_missing", "level": "error", "message": "No DMARC."}],
        checked_at=NOW,
    )


def _full_day(campaign):
    _update(campaign, daily_limit=2, daily_sent_count=2, daily_sent_on=NOW.date())


def _ramp(campaign):
    ramp = {"start_per_day": 2, "increase_per_day": 1}
    _update(campaign, ramp_up=ramp, ramp_started_on=NOW.date(), daily_sent_count=2)
    _update(campaign, daily_sent_on=NOW.date())


def _simulator_day(campaign, settings):
    settings.SIMULATOR_DAILY_LIMIT = 0
    _update(campaign, auth_method="simulator", smtp_host="", smtp_username="", smtp_password="")


def _paced(campaign):
    _update(campaign, min_interval_seconds=60, max_interval_seconds=120)
    _update(campaign, next_send_earliest_at=NOW + timedelta(seconds=90))


def _window(campaign):
    window = {"start": "09:00", "end": "10:00", "days": [1, 2, 3, 4, 5]}
    Campaign.objects.filter(pk=campaign.pk).update(send_window=window)


def _domain_day(campaign):
    Campaign.objects.filter(pk=campaign.pk).update(max_per_recipient_domain_per_day=1)
    RecipientDomainCount.objects.create(
        account=campaign.account, domain="acme.example", day=NOW.date(), count=1
    )


# code -> (what makes it hold, the enrollment's next_send_at)
SITUATIONS = {
    "campaign_completed": (_completed, NOW),
    "campaign_paused": (_paused, NOW),
    "mailbox_disabled": (_disabled, NOW),
    "complaint_rate": (_complaints, NOW),
    "reauthorization_required": (_reauthorization, NOW),
    "domain_unauthenticated": (_unauthenticated, NOW),
    "daily_limit_reached": (_full_day, NOW),
    "ramping_up": (_ramp, NOW),
    "simulator_daily_limit": (_simulator_day, NOW),
    "paced": (_paced, NOW),
    "window_closed": (_window, NOW),
    "recipient_domain_limit": (_domain_day, NOW),
    "nothing_due": (None, NOW + timedelta(hours=1)),
}


def test_every_code_of_the_rules_has_its_situation():
    assert set(SITUATIONS) == set(CODES)


@pytest.mark.parametrize("code", sorted(SITUATIONS))
def test_the_scheduler_gives_no_claim_and_sending_status_says_why(code, settings):
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    mailbox = _mailbox(campaign)
    make, due_at = SITUATIONS[code]
    contact = ContactFactory(account=campaign.account, email="ada@acme.example")
    EnrollmentFactory(campaign=campaign, contact=contact, status="scheduled", next_send_at=due_at)
    if make is _simulator_day:
        make(campaign, settings)
    elif make is not None:
        make(campaign)
    campaign.refresh_from_db()

    [status] = sending_status(campaign=campaign, now=NOW)["mailboxes"]
    assert status["credential_id"] == mailbox.pk
    assert code in [r["code"] for r in status["reasons"]]
    assert status["can_send_now"] is False

    batches = schedule_due(now=NOW)
    assert [b for b in batches if b.credential_id == mailbox.pk] == []
    assert not SendClaim.objects.filter(credential=mailbox).exists()


def test_without_a_blocker_the_scheduler_claims_and_sending_status_says_it_can_send():
    """The situations' counterpart: the same mailbox and enrollment, nothing holding."""
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    contact = ContactFactory(account=campaign.account, email="ada@acme.example")
    EnrollmentFactory(campaign=campaign, contact=contact, status="scheduled", next_send_at=NOW)
    [status] = sending_status(campaign=campaign, now=NOW)["mailboxes"]
    assert (status["can_send_now"], status["reasons"]) == (True, [])
    [batch] = schedule_due(now=NOW)
    assert batch.credential_id == _mailbox(campaign).pk


def test_the_scans_sql_filter_says_what_the_rules_say():
    """`_mailbox_free` leaves out, in SQL, the mailboxes the rules `mailbox_disabled`,
    `complaint_rate` and `paced` hold: over a set of mailboxes in every combination of
    them, and at the edges of the pace, the two agree."""
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE, with_credential=False)
    account = campaign.account
    states = []
    for disabled in (None, NOW - timedelta(hours=1)):
        for paused in (None, NOW - timedelta(hours=1)):
            for pace, earliest in (
                ((0, 0), None),
                ((0, 0), NOW + timedelta(minutes=5)),  # unpaced: its old time says nothing
                ((60, 120), None),
                ((60, 120), NOW - timedelta(seconds=1)),
                ((60, 120), NOW),
                ((60, 120), NOW + timedelta(seconds=1)),
            ):
                states.append(
                    CredentialFactory(
                        account=account,
                        disabled_at=disabled,
                        paused_at=paused,
                        min_interval_seconds=pace[0],
                        max_interval_seconds=pace[1],
                        next_send_earliest_at=earliest,
                    )
                )
    campaign.credentials.add(*states)
    by_sql = set(
        SmtpCredential.objects.filter(account=account)
        .filter(_mailbox_free(NOW))
        .values_list("pk", flat=True)
    )
    by_rules = {
        m.pk
        for m in SmtpCredential.objects.filter(account=account)
        if mailbox_usable(MailboxFacts(m, campaign, NOW))
    }
    assert by_sql == by_rules
    assert 0 < len(by_sql) < len(states)
    held = {
        m.pk: [b.code for b in mailbox_blockers(MailboxFacts(m, campaign, NOW))]
        for m in SmtpCredential.objects.filter(account=account).exclude(pk__in=by_sql)
    }
    assert all(codes for codes in held.values())
