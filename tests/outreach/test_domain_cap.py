"""The recipient domain cap: a campaign's `max_per_recipient_domain_per_day` or the
account's default (`/sending_defaults`), enforced by the send scheduler across mailboxes
and campaigns, with a real SMTP server receiving what is sent, counts kept in PostgreSQL,
two schedulers racing, and the `sending_status` reason."""

import contextlib
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connections

from outreach.domain_cap.counts import counts_purge
from outreach.models.campaigns import Campaign
from outreach.models.domain_cap import RecipientDomainCount
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending import scheduler
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.accounts.factories import AccountFactory
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_fields

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
MIDNIGHT = datetime(2026, 3, 3, tzinfo=UTC)


def _mailbox(sink, account):
    return CredentialFactory(
        account=account,
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="",
        smtp_password="",
    )


def _campaign(account, mailbox, cap=None) -> Campaign:
    campaign = CampaignFactory(
        account=account,
        status=Campaign.Status.ACTIVE,
        with_credential=False,
        max_per_recipient_domain_per_day=cap,
    )
    campaign.credentials.add(mailbox)
    return campaign


def _enroll(campaign, email, at=NOW) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, email=email),
        status="scheduled",
        next_send_at=at,
    )


def _send(batches, now):
    for batch in batches:
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now)


def _received(sink) -> list[str]:
    return sorted(m.rcpt_tos[0] for m in sink.messages)


# --- the scheduler ------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_cap_holds_across_campaigns_and_mailboxes(smtp_sink):
    sink = smtp_sink()
    account = AccountFactory(max_per_recipient_domain_per_day=2)
    first = _campaign(account, _mailbox(sink, account), cap=None)  # the account's 2
    second = _campaign(account, _mailbox(sink, account), cap=3)
    for n in range(3):
        _enroll(first, f"a{n}@acme.example")
        _enroll(second, f"b{n}@sales.acme.example")  # another domain: its own count
        _enroll(second, f"c{n}@acme.example")
        _enroll(first, f"g{n}@gmail.com")  # a consumer mail domain: never capped

    _send(schedule_due(now=NOW), NOW)
    received = _received(sink)
    acme = [r for r in received if r.endswith("@acme.example")]
    # The account's count is shared: `first` may send 2, `second` up to 3 in all.
    assert len(acme) == 3
    assert len([r for r in acme if r.startswith("a")]) <= 2
    assert len([r for r in received if r.endswith("@sales.acme.example")]) == 3
    assert len([r for r in received if r.endswith("@gmail.com")]) == 3
    counts = dict(RecipientDomainCount.objects.values_list("domain", "count"))
    assert counts == {"acme.example": 3, "sales.acme.example": 3}
    waiting = Enrollment.objects.filter(status="scheduled")
    assert waiting.count() == 3
    assert set(waiting.values_list("next_send_at", flat=True)) == {MIDNIGHT}

    # A later run the same day (a new worker: the count is in the database) sends none.
    assert schedule_due(now=NOW + timedelta(hours=1)) == []
    # The next UTC day, the rest (under the caps) go.
    _send(schedule_due(now=MIDNIGHT), MIDNIGHT)
    assert len(sink.messages) == 12
    assert RecipientDomainCount.objects.get(domain="acme.example", day=MIDNIGHT.date()).count == 3


@pytest.mark.django_db
def test_no_cap_means_no_count(smtp_sink):
    sink = smtp_sink()
    account = AccountFactory()
    campaign = _campaign(account, _mailbox(sink, account))
    for n in range(5):
        _enroll(campaign, f"p{n}@acme.example")
    batches = schedule_due(now=NOW)
    assert sum(b.size for b in batches) == 5
    assert not RecipientDomainCount.objects.exists()
    assert set(SendClaim.objects.values_list("domain_count_id", flat=True)) == {None}


@pytest.mark.django_db
def test_a_claim_that_does_not_send_gives_its_unit_back(smtp_sink):
    sink = smtp_sink()
    account = AccountFactory()
    campaign = _campaign(account, _mailbox(sink, account), cap=1)
    _enroll(campaign, "first@acme.example")
    _enroll(campaign, "second@acme.example", at=NOW + timedelta(seconds=1))
    sink.reject_rcpt("first@acme.example", "451 4.7.1 Try again later", times=1)
    _send(schedule_due(now=NOW), NOW)
    assert sink.messages == []
    # The 4xx gave the unit back: the day still has room for one send.
    assert RecipientDomainCount.objects.get().count == 0
    later = NOW + timedelta(minutes=1)
    _send(schedule_due(now=later), later)
    assert _received(sink) == ["second@acme.example"]
    assert RecipientDomainCount.objects.get().count == 1


@pytest.mark.django_db
def test_a_lapsed_claim_of_a_dead_worker_gives_its_unit_back(smtp_sink, settings):
    sink = smtp_sink()
    account = AccountFactory()
    campaign = _campaign(account, _mailbox(sink, account), cap=1)
    _enroll(campaign, "first@acme.example")
    [batch] = schedule_due(now=NOW)  # claimed, never sent: the worker died
    assert RecipientDomainCount.objects.get().count == 1
    after_lease = NOW + timedelta(seconds=settings.SENDING_LEASE_SECONDS + 1)
    _send(schedule_due(now=after_lease), after_lease)
    assert _received(sink) == ["first@acme.example"]
    assert RecipientDomainCount.objects.get().count == 1


@pytest.mark.parametrize("bypass_run_lock", [False, True])
def test_two_schedulers_racing_never_exceed_the_cap(
    live_db, smtp_sink, settings, monkeypatch, bypass_run_lock
):
    """Two runs at once, each its own batch of one (SKIP LOCKED) on its own mailbox, both
    held until the other has read its rows: the count's row lock lets one claim."""
    sink = smtp_sink()
    settings.SENDING_BATCH_SIZE = 1
    decided = threading.local()
    together = threading.Barrier(2)
    real_decide = scheduler._decide

    def decide_together(enrollments, **kwargs):
        if not getattr(decided, "once", False):
            decided.once = True
            with contextlib.suppress(threading.BrokenBarrierError):
                together.wait(timeout=5)
        return real_decide(enrollments, **kwargs)

    monkeypatch.setattr(scheduler, "_decide", decide_together)
    account = AccountFactory(max_per_recipient_domain_per_day=1)
    first = _campaign(account, _mailbox(sink, account))
    second = _campaign(account, _mailbox(sink, account))
    for n in range(2):
        _enroll(first, f"a{n}@acme.example")
        _enroll(second, f"b{n}@acme.example")

    def run(now, out, errors, start):
        decided.once = False
        try:
            start.wait()
            run_once = scheduler._schedule_due if bypass_run_lock else scheduler.schedule_due
            kwargs = {"enqueue": False} if bypass_run_lock else {}
            out.extend(run_once(now=now, **kwargs))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    for now in (NOW, NOW + timedelta(seconds=5), NOW + timedelta(seconds=10)):
        batches, errors, start = [], [], threading.Barrier(2)
        together.reset()
        threads = [
            threading.Thread(target=run, args=(now, batches, errors, start)) for _ in range(2)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=60)
        assert errors == []
        _send(batches, now)
    assert len(sink.messages) == 1
    assert RecipientDomainCount.objects.get().count == 1


@pytest.mark.django_db
def test_past_days_counts_are_purged():
    account = AccountFactory()
    for days in range(5):
        RecipientDomainCount.objects.create(
            account=account, domain="acme.example", day=(NOW - timedelta(days=days)).date()
        )
    assert counts_purge(today=NOW.date()) == 2
    assert RecipientDomainCount.objects.count() == 3


# --- sending_status -----------------------------------------------------------------------


@pytest.mark.django_db
def test_sending_status_names_the_domains_held(api_client, account, smtp_sink, monkeypatch):
    sink = smtp_sink()
    campaign = _campaign(account, _mailbox(sink, account), cap=1)
    for n in range(3):
        _enroll(campaign, f"p{n}@acme.example")
    _enroll(campaign, "solo@other.example")
    monkeypatch.setattr("django.utils.timezone.now", lambda: NOW)
    _send(schedule_due(now=NOW), NOW)
    status = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    [mailbox] = status["mailboxes"]
    reasons = {r["code"]: r for r in mailbox["reasons"]}
    assert reasons["recipient_domain_limit"]["until"] == "2026-03-03T00:00:00.000000Z"
    assert "acme.example" in reasons["recipient_domain_limit"]["detail"]
    assert "other.example" not in reasons["recipient_domain_limit"]["detail"]
    # The plan spreads the held ones over the next days, one a day.
    days = sorted(u["earliest_at"][:10] for u in status["upcoming"])
    assert days == ["2026-03-03", "2026-03-04"]


# --- the API ------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_campaign_field(api_client, account):
    created = api_client.post(
        "/campaigns", {"name": "Capped", "max_per_recipient_domain_per_day": 5}, format="json"
    )
    assert created.status_code == 201, created.content
    assert created.json()["max_per_recipient_domain_per_day"] == 5
    url = f"/campaigns/{created.json()['id']}"
    patched = api_client.patch(url, {"max_per_recipient_domain_per_day": None}, format="json")
    assert patched.json()["max_per_recipient_domain_per_day"] is None
    for bad in (0, -1, "many", 100_001, 2.5):
        response = api_client.patch(url, {"max_per_recipient_domain_per_day": bad}, format="json")
        assert_fields(response, "max_per_recipient_domain_per_day")
    assert api_client.get(url).json()["max_per_recipient_domain_per_day"] is None


@pytest.mark.django_db
def test_the_account_default(api_client, other_client, account):
    assert api_client.get("/sending_defaults").json() == {"max_per_recipient_domain_per_day": None}
    response = api_client.patch(
        "/sending_defaults", {"max_per_recipient_domain_per_day": 20}, format="json"
    )
    assert response.json() == {"max_per_recipient_domain_per_day": 20}
    account.refresh_from_db()
    assert account.max_per_recipient_domain_per_day == 20
    # Another account's default is its own.
    assert other_client.get("/sending_defaults").json() == {
        "max_per_recipient_domain_per_day": None
    }
    assert api_client.patch("/sending_defaults", {}, format="json").json() == {
        "max_per_recipient_domain_per_day": 20
    }
    for bad in (0, "x", 100_001):
        response = api_client.patch(
            "/sending_defaults", {"max_per_recipient_domain_per_day": bad}, format="json"
        )
        assert_fields(response, "max_per_recipient_domain_per_day")
    account.refresh_from_db()
    assert account.max_per_recipient_domain_per_day == 20
