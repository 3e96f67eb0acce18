"""GET /campaigns/:id/sending_status: per mailbox, whether it can send now and every
reason it cannot with the time it lifts; the next planned sends; and no side effects.
The reasons and the plan are asked at a fixed `now` (the service takes the clock); the
endpoint itself answers for the real one."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outreach.campaigns.sending_status import sending_status
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.scheduler import schedule_due
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
TUESDAY = datetime(2026, 3, 3, tzinfo=UTC)


def _campaign(*, pace=(0, 0), **kwargs) -> Campaign:
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE, **kwargs)
    SmtpCredential.objects.filter(campaigns=campaign).update(
        min_interval_seconds=pace[0], max_interval_seconds=pace[1]
    )
    return campaign


def _enroll(campaign, *, at=NOW, zone="", **fields) -> Enrollment:
    contact = ContactFactory(account=campaign.account, timezone=zone)
    return EnrollmentFactory(
        campaign=campaign, contact=contact, status="scheduled", next_send_at=at, **fields
    )


def _status(campaign, now=NOW) -> dict:
    campaign.refresh_from_db()
    return sending_status(campaign=campaign, now=now)


def _reasons(answer, index=0) -> list[tuple]:
    return [(r["code"], r["until"]) for r in answer["mailboxes"][index]["reasons"]]


def _plan(answer) -> list[tuple]:
    return [(u["enrollment_id"], u["step"], u["earliest_at"]) for u in answer["upcoming"]]


def test_a_mailbox_that_can_send_now_and_its_plan():
    campaign = _campaign()
    credential = campaign.credentials.get()
    enrollment = _enroll(campaign)
    answer = _status(campaign)
    assert answer["campaign_id"] == campaign.pk and answer["status"] == "active"
    [mailbox] = answer["mailboxes"]
    assert mailbox == {
        "credential_id": credential.pk,
        "from_email": credential.from_email,
        "can_send_now": True,
        "reasons": [],
        "next_send_earliest_at": None,
        "sent_today": 0,
        "daily_limit": 50,
        "domain_check": None,  # never checked (tests/domains/test_sender_domain_check.py)
    }
    assert answer["upcoming"] == [
        {
            "enrollment_id": enrollment.pk,
            "contact_email": enrollment.contact.email,
            "step": 1,
            "key": "step_1",
            "credential_id": credential.pk,
            "earliest_at": NOW,
            "blocker": None,
        }
    ]


def test_window_closed_until_the_next_opening():
    campaign = _campaign(send_window={"start": "09:00", "end": "10:00", "days": [1, 2, 3, 4, 5]})
    enrollment = _enroll(campaign)
    answer = _status(campaign)
    opening = TUESDAY.replace(hour=9)
    assert _reasons(answer) == [("window_closed", opening)]
    assert _plan(answer) == [(enrollment.pk, 1, opening)]


def test_window_closed_is_read_in_the_contacts_zone():
    campaign = _campaign(
        send_window={"start": "09:00", "end": "10:00", "days": [1, 2, 3, 4, 5]},
        send_in_contact_timezone=True,
    )
    enrollment = _enroll(campaign, zone="America/New_York")  # 05:00 there
    answer = _status(campaign)
    opening = NOW.replace(hour=14)  # 09:00 EST
    assert _reasons(answer) == [("window_closed", opening)]
    assert _plan(answer) == [(enrollment.pk, 1, opening)]


def test_paced_until_its_next_send_and_a_plan_spaced_by_its_minimum():
    campaign = _campaign(pace=(120, 300))
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        next_send_earliest_at=NOW + timedelta(seconds=90)
    )
    enrollments = [_enroll(campaign, at=NOW - timedelta(minutes=3 - i)) for i in range(3)]
    answer = _status(campaign)
    assert _reasons(answer) == [("paced", NOW + timedelta(seconds=90))]
    assert answer["mailboxes"][0]["next_send_earliest_at"] == NOW + timedelta(seconds=90)
    assert _plan(answer) == [
        (e.pk, 1, NOW + timedelta(seconds=90 + 120 * i)) for i, e in enumerate(enrollments)
    ]


@pytest.mark.parametrize(
    ("daily_limit", "maximum"),
    [(2, 2000), (1_000_000, 2)],  # a limit stored above DAILY_LIMIT_MAX counts as the maximum
)
def test_daily_limit_reached_until_utc_midnight(settings, daily_limit, maximum):
    settings.DAILY_LIMIT_MAX = maximum
    campaign = _campaign()
    SmtpCredential.objects.filter(campaigns=campaign).update(
        daily_limit=daily_limit, daily_sent_count=2, daily_sent_on=NOW.date()
    )
    first, second, third = (_enroll(campaign) for _ in range(3))
    answer = _status(campaign)
    assert _reasons(answer) == [("daily_limit_reached", TUESDAY)]
    assert answer["mailboxes"][0]["reasons"][0]["detail"] == "2 sends per UTC day."
    assert (answer["mailboxes"][0]["sent_today"], answer["mailboxes"][0]["daily_limit"]) == (2, 2)
    # Two a day: two on Tuesday, the third on Wednesday.
    assert [at for _, _, at in _plan(answer)] == [TUESDAY, TUESDAY, TUESDAY + timedelta(days=1)]


def test_a_disabled_mailbox_says_why_and_the_plan_uses_the_other():
    campaign = _campaign()
    disabled = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=disabled.pk).update(
        disabled_at=NOW, disabled_reason="bounce_rate_exceeded"
    )
    other = CredentialFactory(account=campaign.account)
    campaign.credentials.add(other)
    _enroll(campaign)
    answer = _status(campaign)
    first, second = answer["mailboxes"]
    assert first["credential_id"] == disabled.pk  # in the order they were attached
    assert first["reasons"] == [
        {
            "code": "mailbox_disabled",
            "until": None,
            "detail": "bounce_rate_exceeded",
            "since": None,
            "retry_at": None,
        }
    ]
    assert (second["can_send_now"], second["reasons"]) == (True, [])
    assert [u["credential_id"] for u in answer["upcoming"]] == [other.pk]


def test_a_mailbox_to_connect_again_says_so_and_the_plan_skips_it():
    campaign = _campaign()
    revoked = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=revoked.pk).update(
        auth_method="oauth_google", oauth_status="reauthorization_required"
    )
    other = CredentialFactory(account=campaign.account)
    campaign.credentials.add(other)
    _enroll(campaign)
    answer = _status(campaign)
    first, second = answer["mailboxes"]
    assert first["credential_id"] == revoked.pk
    assert first["can_send_now"] is False
    assert [r["code"] for r in first["reasons"]] == ["reauthorization_required"]
    assert "POST /smtp_credentials/oauth" in first["reasons"][0]["detail"]
    assert (second["can_send_now"], second["reasons"]) == (True, [])
    assert [u["credential_id"] for u in answer["upcoming"]] == [other.pk]


@pytest.mark.parametrize(
    ("status", "code"),
    [("paused", "campaign_paused"), ("completed", "campaign_completed")],
)
def test_a_campaign_that_does_not_send_says_so_and_plans_nothing(status, code):
    campaign = _campaign()
    _enroll(campaign)
    Campaign.objects.filter(pk=campaign.pk).update(status=status)
    answer = _status(campaign)
    assert answer["status"] == status
    assert code in [c for c, _ in _reasons(answer)]
    assert answer["mailboxes"][0]["can_send_now"] is False
    assert answer["upcoming"] == []


def test_nothing_due_until_the_next_enrollment_is():
    campaign = _campaign()
    later = _enroll(campaign, at=NOW + timedelta(hours=1))
    answer = _status(campaign)
    assert _reasons(answer) == [("nothing_due", NOW + timedelta(hours=1))]
    assert _plan(answer) == [(later.pk, 1, NOW + timedelta(hours=1))]
    Enrollment.objects.filter(pk=later.pk).update(status="completed", next_send_at=None)
    assert _reasons(_status(campaign)) == [("nothing_due", None)]


def test_every_reason_at_once_is_listed():
    campaign = _campaign(pace=(60, 60), send_window={"start": "09:00", "end": "10:00", "days": [1]})
    SmtpCredential.objects.filter(campaigns=campaign).update(
        next_send_earliest_at=NOW + timedelta(minutes=5),
        daily_limit=1,
        daily_sent_count=1,
        daily_sent_on=NOW.date(),
    )
    _enroll(campaign)
    codes = [code for code, _ in _reasons(_status(campaign))]
    assert codes == ["daily_limit_reached", "paced", "window_closed"]


def test_the_plan_lists_at_most_twenty_in_time_order():
    campaign = _campaign()
    enrollments = [_enroll(campaign, at=NOW - timedelta(seconds=i)) for i in range(25)]
    claimed = enrollments[0]
    SendClaim.objects.create(
        enrollment=claimed,
        batch_id=uuid.uuid4(),
        credential=campaign.credentials.get(),
        step=1,
        claimed_at=NOW,
        lease_until=NOW + timedelta(minutes=15),
    )
    answer = _status(campaign)
    assert len(answer["upcoming"]) == 20
    planned = [u["enrollment_id"] for u in answer["upcoming"]]
    assert claimed.pk not in planned  # in flight: not planned again
    assert planned == [e.pk for e in reversed(enrollments[1:])][:20]


def test_asking_changes_nothing():
    campaign = _campaign(pace=(120, 300))
    for _ in range(3):
        _enroll(campaign)

    def snapshot():
        return (
            list(SmtpCredential.objects.order_by("pk").values()),
            list(Enrollment.objects.order_by("pk").values()),
            list(Campaign.objects.order_by("pk").values()),
            SendClaim.objects.count(),
        )

    before = snapshot()
    with CaptureQueriesContext(connection) as queries:
        _status(campaign)
    assert snapshot() == before
    statements = [q["sql"].lstrip().upper() for q in queries.captured_queries]
    assert statements and all(s.startswith("SELECT") and "FOR UPDATE" not in s for s in statements)
    # And the scheduler still claims exactly as if nobody had asked.
    [batch] = schedule_due(now=NOW)
    assert batch.size == 1


# --- the endpoint ------------------------------------------------------------------------


def test_the_endpoint_answers_with_bounded_queries(
    api_client, account, django_assert_max_num_queries, auth_queries
):
    campaign = CampaignFactory(account=account, status="active")
    campaign.credentials.add(CredentialFactory(account=account))
    for _ in range(30):
        _enroll(campaign, at=timezone.now() - timedelta(minutes=1))
    SmtpCredential.objects.filter(campaigns=campaign).update(
        min_interval_seconds=0, max_interval_seconds=0
    )
    # A mailbox whose last attempt failed: its blocker costs no query of its own.
    failing = campaign.credentials.order_by("from_email").first()
    SmtpCredential.objects.filter(pk=failing.pk).update(
        last_error="cannot connect to 127.0.0.1:2525: [Errno 111] Connection refused",
        last_error_at=timezone.now(),
    )
    # One query more than before the circuit breaker: its pauses in force, all mailboxes'
    # at once, however many mailboxes and providers.
    with django_assert_max_num_queries(auth_queries + 7):
        response = api_client.get(f"/campaigns/{campaign.pk}/sending_status")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {"campaign_id", "status", "mailboxes", "upcoming"}
    assert sorted(m["can_send_now"] for m in body["mailboxes"]) == [False, True]
    assert len(body["upcoming"]) == 20
    assert set(body["upcoming"][0]) == {
        "enrollment_id",
        "contact_email",
        "step",
        "key",
        "credential_id",
        "earliest_at",
        "blocker",
    }
    blocked = [u for u in body["upcoming"] if u["credential_id"] == str(failing.pk)]
    assert blocked and {u["blocker"]["code"] for u in blocked} == {"mailbox_unreachable"}
    assert body["upcoming"][0]["earliest_at"].endswith("Z")


def test_paced_until_is_shown_as_a_timestamp(api_client, account):
    campaign = CampaignFactory(account=account, status="active")
    until = timezone.now() + timedelta(hours=1)
    SmtpCredential.objects.filter(campaigns=campaign).update(
        min_interval_seconds=60, max_interval_seconds=60, next_send_earliest_at=until
    )
    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    shown = until.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"
    assert body["mailboxes"][0]["reasons"][0] == {
        "code": "paced",
        "until": shown,
        "detail": "60 to 60 seconds between two sends of this mailbox.",
        "since": None,
        "retry_at": None,
    }
    assert body["mailboxes"][0]["next_send_earliest_at"] == shown


def test_another_accounts_campaign_is_not_found(api_client, other_account):
    campaign = CampaignFactory(account=other_account)
    response = api_client.get(f"/campaigns/{campaign.pk}/sending_status")
    assert_error(response, 404, "campaign_not_found")
    response = api_client.get(f"/campaigns/{uuid.uuid4()}/sending_status")
    assert_error(response, 404, "campaign_not_found")


def test_it_needs_a_key(anon_client):
    response = anon_client.get(f"/campaigns/{uuid.uuid4()}/sending_status")
    assert_error(response, 401, "authentication_required")


def test_it_is_read_only(api_client, account):
    campaign = CampaignFactory(account=account)
    response = api_client.post(f"/campaigns/{campaign.pk}/sending_status")
    assert_error(response, 405, "method_not_allowed")


def test_every_reason_the_service_gives_is_in_the_published_schema():
    """The serializer's choices are the API schema's enum: a reason code the service
    returns but the schema lacks would surprise a client generated from it."""
    from outreach.campaigns.serializers import SendingReasonSerializer
    from outreach.mailboxes.blockers import CODES

    # The scheduler's blockers, and the two said beside them: the batch sender's record of
    # a failed connection, and the circuit breaker's pauses (once per provider).
    given = set(CODES) | {"mailbox_unreachable", "provider_paused"}
    assert given == set(SendingReasonSerializer().fields["code"].choices)
