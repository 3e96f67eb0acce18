"""The analytics counters kept on write (outreach.analytics, docs/analytics.md): real
sends to an SMTP server (aiosmtpd), opens, clicks, replies, labels, unsubscribes,
bounces, complaints and responses through their services and the API, then the series
of GET /analytics compared with a count of the messages, enrollments, replies and
responses themselves: nothing lost, nothing counted twice. And the recount rebuilds
the same rows."""

from collections import Counter
from datetime import UTC, date, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db.models import Sum
from django.utils import timezone

from outreach.analytics.fold import hours_fold
from outreach.campaigns.clicks import ClickTarget
from outreach.intake.clicks import enrollment_mark_clicked
from outreach.intake.relay import COMPLAINT, RelayEvent, RelayOutcome, relay_event_apply
from outreach.intake.services import (
    contact_unsubscribe,
    enrollment_mark_opened,
    enrollment_mark_replied,
)
from outreach.models.analytics import COUNTERS, AnalyticsDay, AnalyticsHour
from outreach.models.conversations import Reply, ReplyResponse
from outreach.models.sending import Enrollment, Message
from outreach.sending.bounces import enrollment_mark_bounced
from tests.conversations.reply_rows import reply_for
from tests.outreach.test_sending import _campaign, _enroll, _run
from tests.outreach.test_simulator_sending import simulator_mailbox

pytestmark = pytest.mark.django_db

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
TYPES = {
    "r6@example.org": "hard",
    "r7@example.org": "block",
    "r4@example.org": "soft",
}


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _analytics(client, **query) -> dict:
    answer = client.get("/analytics", query)
    assert answer.status_code == 200, answer.content
    return answer.json()


def _life(account, api_client, sink, django_capture_on_commit_callbacks):
    """Two steps to eight contacts and all that follows (the module docstring)."""
    campaign = _campaign(sink, steps=2, account=account)
    sink.reject_rcpt("r6@example.org", "550 5.1.1 No such user here")
    sink.reject_rcpt("r7@example.org", "550 5.7.1 Client host blocked using Spamhaus")
    people = {f"r{i}": _enroll(campaign, email=f"r{i}@example.org") for i in range(8)}
    simulated = _campaign(sink, account=account)
    simulated.credentials.set([simulator_mailbox(account)])
    _enroll(simulated, email="sim@simulator.test")
    _run(NOW)
    for _ in range(2):  # a repeat open counts once
        enrollment_mark_opened(enrollment_id=people["r0"].pk, at=NOW + HOUR)
    enrollment_mark_opened(enrollment_id=people["r1"].pk, at=NOW + HOUR)
    for _ in range(2):
        target = ClickTarget(people["r0"].pk, 1, "A", "https://example.com/")
        enrollment_mark_clicked(target=target, at=NOW + 90 * timedelta(minutes=1))
    enrollment_mark_replied(enrollment_id=people["r2"].pk, at=NOW + DAY)
    enrollment_mark_replied(enrollment_id=people["r2"].pk, at=NOW + DAY)  # known: nothing
    mailbox = campaign.credentials.get().pk
    positive = reply_for(people["r2"], received_at=NOW + DAY, credential_id=mailbox)
    relabelled = reply_for(people["r1"], received_at=NOW + DAY + HOUR, credential_id=mailbox)
    for reply, label in ((positive, "interested"), (relabelled, "meeting_booked")):
        answer = api_client.patch(f"/replies/{reply.pk}", {"label": label}, format="json")
        assert answer.status_code == 200, answer.content
    api_client.patch(f"/replies/{positive.pk}", {"label": "meeting_booked"}, format="json")
    api_client.patch(f"/replies/{relabelled.pk}", {"label": "not_interested"}, format="json")
    contact_unsubscribe(contact_id=people["r3"].contact_id, at=NOW + DAY + HOUR)
    contact_unsubscribe(contact_id=people["r3"].contact_id, at=NOW + DAY + 2 * HOUR)
    enrollment_mark_bounced(
        enrollment=people["r4"], reason="552 5.2.2 Mailbox full", at=NOW + DAY + 3 * HOUR
    )
    _run(NOW + DAY + timedelta(minutes=1))  # the second step
    with django_capture_on_commit_callbacks(execute=True):
        answer = api_client.post(
            f"/replies/{positive.pk}/respond", {"body_text": "Tuesday?"}, format="json"
        )
    assert answer.status_code == 201, answer.content
    return campaign, people


def _expected(account, start: date, end: date) -> dict[date, Counter]:
    """The series counted from the rows themselves, by UTC date."""
    days: dict[date, Counter] = {}

    def add(at, name):
        if at is not None and start <= at.date() <= end:
            days.setdefault(at.date(), Counter())[name] += 1

    for m in Message.objects.filter(account=account):
        add(m.sent_at, "sent")
        add(m.opened_at, "opened")
        add(m.clicked_at, "clicked")
    for e in Enrollment.objects.filter(campaign__account=account):
        add(e.replied_at, "replied")
        add(e.unsubscribed_at, "unsubscribed")
        add(e.bounced_at, f"bounced_{TYPES[e.contact.email]}" if e.bounced_at else "")
    for r in Reply.objects.filter(account=account, label__in=["interested", "meeting_booked"]):
        add(r.received_at, "positive_replies")
    for s in ReplyResponse.objects.filter(account=account, status="sent"):
        add(s.sent_at, "responses")
    return days


def _flat(row: dict) -> dict:
    flat = {name: row[name] for name in COUNTERS if not name.startswith("bounced_")}
    flat.update({f"bounced_{kind}": n for kind, n in row["bounced"].items()})
    return flat


def _kept() -> dict:
    """Every key's counters, its shards summed."""
    keys = ("account_id", "grain", "campaign_id", "credential_id", "step_key", "hour", "simulated")
    rows = AnalyticsHour.objects.values(*keys).annotate(**{n: Sum(n) for n in COUNTERS})
    return {tuple(r[k] for k in keys): {n: r[n] for n in COUNTERS} for r in rows.order_by()}


def test_the_series_is_a_count_of_the_messages_and_events(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    campaign, people = _life(account, api_client, sink, django_capture_on_commit_callbacks)
    today = timezone.now().date()
    body = _analytics(api_client, **{"from": "2026-03-02", "to": today.isoformat()})
    expected = _expected(account, NOW.date(), today)
    assert len(body["series"]) == (today - NOW.date()).days + 1  # every date
    for row in body["series"]:
        day = date.fromisoformat(row["date"])
        assert _flat(row) == {name: expected.get(day, Counter())[name] for name in COUNTERS}, day
    # What the scenario made, by name: 8 + 1 simulated first steps less two refused at
    # RCPT, three second steps (r0, r1, r5); the labels' net two positive... one.
    totals = _flat(body["totals"])
    assert totals == {
        "sent": 7 + 3,
        "opened": 2,
        "clicked": 1,
        "replied": 1,
        "positive_replies": 1,
        "bounced_hard": 1,
        "bounced_soft": 1,
        "bounced_block": 1,
        "unsubscribed": 1,
        "complaints": 0,
        "responses": 1,
    }


def test_each_grain_counts_its_own_and_the_simulator_apart(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    campaign, people = _life(account, api_client, sink, django_capture_on_commit_callbacks)
    real = AnalyticsHour.objects.filter(account=account, grain="account", simulated=False)
    assert real.aggregate(n=Sum("sent"))["n"] == 9  # the staff dashboard's rows
    sim = AnalyticsHour.objects.filter(account=account, grain="account", simulated=True)
    assert sim.aggregate(n=Sum("sent"))["n"] == 1
    query = {"from": "2026-03-02", "to": "2026-03-04"}
    by_campaign = _analytics(api_client, campaign_id=str(campaign.pk), **query)["totals"]
    assert (by_campaign["sent"], by_campaign["opened"]) == (9, 2)
    credential = campaign.credentials.get()
    by_mailbox = _analytics(api_client, credential_id=str(credential.pk), **query)["totals"]
    assert (by_mailbox["sent"], by_mailbox["bounced"]) == (9, {"hard": 1, "soft": 1, "block": 1})
    [first, second] = campaign.steps.order_by("position").values_list("key", flat=True)
    step1 = _analytics(api_client, campaign_id=str(campaign.pk), step_key=first, **query)
    step2 = _analytics(api_client, campaign_id=str(campaign.pk), step_key=second, **query)
    # A reply, unsubscribe or bounce counts for the last step sent before it.
    assert _flat(step1["totals"]) | {"sent": 0} == _flat(by_campaign) | {"sent": 0}
    assert (step1["totals"]["sent"], step2["totals"]["sent"]) == (6, 3)


def test_a_complaint_counts_once_for_the_message_it_names(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    campaign, people = _life(account, api_client, sink, django_capture_on_commit_callbacks)
    message = Message.objects.get(enrollment=people["r5"], step=1)
    credential = campaign.credentials.get()
    relay_event_apply(
        credential=credential,
        event=RelayEvent(kind=COMPLAINT, message_id=message.message_id),
        outcome=RelayOutcome(),
    )
    today = timezone.now().date().isoformat()
    body = _analytics(api_client, **{"from": today, "to": today})
    # r5 had completed its sequence: the complaint suppressed the contact, but ended no
    # enrollment, so no unsubscribe is counted (docs/analytics.md).
    assert (body["totals"]["complaints"], body["totals"]["unsubscribed"]) == (1, 0)
    step1 = campaign.steps.get(position=1).key
    by_step = _analytics(
        api_client, campaign_id=str(campaign.pk), step_key=step1, **{"from": today, "to": today}
    )
    assert by_step["totals"]["complaints"] == 1  # the step of the message it names


def _life_with_a_complaint(account, api_client, sink, on_commit) -> None:
    """The life of the campaign, then a relay's complaint about r5's first message."""
    campaign, people = _life(account, api_client, sink, on_commit)
    message = Message.objects.get(enrollment=people["r5"], step=1)
    relay_event_apply(
        credential=campaign.credentials.get(),
        event=RelayEvent(kind=COMPLAINT, message_id=message.message_id),
        outcome=RelayOutcome(),
    )


def test_the_recount_rebuilds_the_same_rows_and_keeps_the_complaints(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    _life_with_a_complaint(account, api_client, sink, django_capture_on_commit_callbacks)
    kept = _kept()
    AnalyticsHour.objects.filter(account=account).update(sent=0, opened=7, bounced_hard=3)
    call_command("analytics_recount", str(account.pk))
    assert {key: counts for key, counts in _kept().items() if any(counts.values())} == kept
    call_command("analytics_recount")  # every account: the same again
    assert {key: counts for key, counts in _kept().items() if any(counts.values())} == kept


def test_the_recount_fills_hours_from_before_the_counters(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    _life(account, api_client, sink, django_capture_on_commit_callbacks)
    kept = _kept()
    AnalyticsHour.objects.all().delete()  # as the migration leaves existing data
    call_command("analytics_recount")
    assert {key: counts for key, counts in _kept().items() if any(counts.values())} == kept


def test_the_recount_rebuilds_moved_days_and_keeps_their_complaints(
    account, api_client, sink, django_capture_on_commit_callbacks
):
    _life_with_a_complaint(account, api_client, sink, django_capture_on_commit_callbacks)
    span = {"from": "2026-03-02", "to": timezone.now().date().isoformat()}
    series = _analytics(api_client, **span)
    hours_fold(before=timezone.now() + timedelta(hours=1))  # every hour into its day
    assert not AnalyticsHour.objects.filter(account=account).exists()
    AnalyticsDay.objects.filter(account=account).update(sent=[5] * 24, opened=[7] * 24)
    call_command("analytics_recount", str(account.pk))
    assert _analytics(api_client, **span) == series
    assert series["totals"]["complaints"] == 1
    hours_fold(before=timezone.now() + timedelta(hours=1))
    assert _analytics(api_client, **span) == series
