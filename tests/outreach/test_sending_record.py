"""The record of an accepted message is one statement (outreach.sending.record_sql), its
only form: it makes the counter rows a first send needs; when it lacks the period's
usage record or the enrollment changed since its claim, it writes nothing and runs
again once the record is made, or the enrollment read."""

import contextlib
from datetime import timedelta

import pytest
from django.utils import timezone

from billing.usage import usage_record_current
from outreach.enrollments import stats_check, stats_read, variant_stats_read
from outreach.enrollments.branching import branch_stats_read
from outreach.intake.services import enrollment_mark_opened
from outreach.models.branches import BranchDecision
from outreach.models.sending import CredentialCampaignStats, Enrollment, Message, SendClaim
from outreach.sending import batch, record_sql, smtp
from tests.outreach.branching import NUDGE_THEN_BRANCH, enrolled, graph_campaign, run
from tests.outreach.factories import CampaignFactory
from tests.outreach.test_sending import NOW, _campaign, _enroll, _run
from webhooks.models import DeliveryJob, Event, Webhook
from webhooks.secrets import secret_generate
from webhooks.tasks import webhook_drain

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


@pytest.fixture
def statements(monkeypatch):
    """How each run of the statement answered: "recorded", or what it lacked (nothing
    written)."""
    answers = []
    real = record_sql.record_sent

    def counting(**kwargs):
        recorded = real(**kwargs)
        missing = isinstance(recorded, record_sql.Missing)
        answers.append(recorded.what if missing else "recorded")
        return recorded

    monkeypatch.setattr(record_sql, "record_sent", counting)
    return answers


@pytest.fixture
def drains(monkeypatch):
    """The drain messages put on the broker (webhook ids), instead of running them."""
    sent = []
    monkeypatch.setattr(
        webhook_drain, "apply_async", lambda args, kwargs=None, **kw: sent.append(args[0])
    )
    return sent


def _webhook(account, filters, *, disabled=False):
    return Webhook.objects.create(
        account=account,
        url="https://receiver.example/hook",
        event_filters=filters,
        secret=secret_generate(),
        disabled_at=NOW if disabled else None,
    )


def _scenario(sink, capture):
    """Three contacts of a two-step campaign, four webhooks of which two want the event."""
    campaign = _campaign(sink, steps=2)
    account = campaign.account
    hooks = {
        "all": _webhook(account, ["*"]),
        "sent": _webhook(account, ["enrollment.sent", "enrollment.bounced"]),
        "other": _webhook(account, ["enrollment.replied"]),
        "disabled": _webhook(account, ["*"], disabled=True),
    }
    enrollments = [_enroll(campaign, email=f"r{i}@example.org") for i in range(3)]
    with capture(**({"execute": True} if capture is not contextlib.nullcontext else {})):
        _run()
    return campaign, hooks, enrollments


def _ids_out(data: dict, ids: dict) -> dict:
    """The generated ids of a scenario replaced by what they name."""
    return {k: ids.get(str(v), v) for k, v in data.items()}


def _snapshot(campaign, hooks, enrollments) -> dict:
    """Everything the record writes, without generated ids and wall-clock times."""
    credential = campaign.credentials.get()
    credential.refresh_from_db()
    names = {str(w.pk): name for name, w in hooks.items()}
    events = list(Event.objects.filter(account=campaign.account).order_by("created_at"))
    order = {str(e.pk): i for i, e in enumerate(enrollments)}
    ids = {str(credential.pk): "credential", str(campaign.pk): "campaign"}
    for i, e in enumerate(enrollments):
        ids |= {str(e.pk): f"enrollment {i}", str(e.contact_id): f"contact {i}"}
    return {
        "enrollments": [
            _ids_out(row, ids)
            for row in Enrollment.objects.filter(pk__in=[e.pk for e in enrollments])
            .order_by("contact__email")
            .values(
                "status",
                "current_step",
                "sent_at",
                "next_send_at",
                "completed_at",
                "credential_id",
                "send_attempts",
                "last_error",
                "updated_at",
            )
        ],
        "messages": sorted(
            (order[str(m.enrollment_id)], m.step, m.to_email, m.subject, m.text, m.sent_at)
            for m in Message.objects.filter(account=campaign.account)
        ),
        "message_credentials": {
            ids[str(pk)]
            for pk in Message.objects.filter(account=campaign.account).values_list(
                "credential_id", flat=True
            )
        },
        "attempts": sorted(
            (
                order[str(a.enrollment_id)],
                a.step,
                a.outcome,
                a.reply_code,
                a.reply_text,
                a.outcome_unknown,
                a.finished_at,
                a.duration_ms is not None,
                a.text,
            )
            for a in SendClaim.objects.filter(credential=credential)
        ),
        "sent_count": credential.sent_count,
        "stats": list(
            CredentialCampaignStats.objects.filter(campaign=campaign).values_list(
                "sends", "bounces"
            )
        ),
        "usage": usage_record_current(account=campaign.account, at=NOW).sends_count,
        "campaign_stats": stats_read(campaign_ids=[campaign.pk])[campaign.pk],
        "events": sorted(
            (e.type, order[e.data["enrollment_id"]], sorted(_ids_out(e.data, ids).items()))
            for e in events
        ),
        "jobs": sorted(
            (order[job.event.data["enrollment_id"]], names[str(job.webhook_id)], job.state)
            for job in DeliveryJob.objects.select_related("event").filter(
                event__account=campaign.account
            )
        ),
        "jobs_due_when_emitted": all(
            abs(job.next_attempt_at - job.event.created_at) < timedelta(seconds=5)
            and abs(job.created_at - job.event.created_at) < timedelta(seconds=5)
            for job in DeliveryJob.objects.select_related("event").filter(
                event__account=campaign.account
            )
        ),
        "rung": sorted(
            names[str(pk)]
            for pk in Webhook.objects.filter(
                account=campaign.account, drain_enqueued_at__isnull=False
            ).values_list("pk", flat=True)
        ),
    }


def test_the_statement_records_the_rows_events_and_delivery_jobs(
    sink, statements, drains, django_capture_on_commit_callbacks
):
    campaign, hooks, enrollments = _scenario(sink, django_capture_on_commit_callbacks)
    rows = _snapshot(campaign, hooks, enrollments)
    # The period's first send makes its usage record, then the same statement applies.
    assert statements == ["usage", "recorded", "recorded", "recorded"]
    # One drain message per webhook that wants the event, not one per event.
    assert sorted(drains) == sorted([str(hooks["all"].pk), str(hooks["sent"].pk)])

    assert (rows["usage"], rows["sent_count"], rows["stats"]) == (3, 3, [(3, 0)])
    assert (rows["campaign_stats"]["enrolled"], rows["campaign_stats"]["sent"]) == (3, 3)
    assert len(rows["jobs"]) == 6  # three events, two webhooks want them
    assert {name for _, name, _ in rows["jobs"]} == {"all", "sent"}
    assert {state for *_, state in rows["jobs"]} == {"pending"}
    assert rows["rung"] == ["all", "sent"]
    assert rows["jobs_due_when_emitted"]
    assert [e["status"] for e in rows["enrollments"]] == ["sent"] * 3
    assert {e["current_step"] for e in rows["enrollments"]} == {1}
    assert {e["credential_id"] for e in rows["enrollments"]} == {"credential"}
    assert {(e["send_attempts"], e["last_error"]) for e in rows["enrollments"]} == {(0, "")}
    assert rows["message_credentials"] == {"credential"}
    assert [(i, step) for i, step, *_ in rows["messages"]] == [(0, 1), (1, 1), (2, 1)]
    # The text as sent.
    assert {text for *_, text, _sent_at in rows["messages"]} == {"Step 1 for Acme"}
    assert {(a[2], a[5], a[8]) for a in rows["attempts"]} == {("sent", False, "")}
    assert {dict(data)["status"] for *_, data in rows["events"]} == {"sent"}
    assert [(t, i) for t, i, _ in rows["events"]] == [("enrollment.sent", i) for i in range(3)]


def test_an_enrollment_changed_since_its_claim_is_recorded_as_it_is_once(
    sink, statements, drains, monkeypatch
):
    """A reply between the claim and the record: the statement does not apply (nothing
    half written); run again with the enrollment read under its lock, it records the
    message and emits the enrollment as it is."""
    campaign = _campaign(sink, steps=2)
    warm = _enroll(campaign, email="warm@example.org")
    _run()  # the period's usage record
    replied = _enroll(campaign, email="replied@example.org")
    real_transaction = smtp.smtp_transaction

    def reply_during_send(*args, **kwargs):
        real_transaction(*args, **kwargs)
        Enrollment.objects.filter(pk=replied.pk).update(status="replied", replied_at=NOW)

    monkeypatch.setattr(batch, "smtp_transaction", reply_during_send)
    statements.clear()
    _run()

    assert statements == ["moved", "recorded"]
    replied.refresh_from_db()
    assert replied.status == "replied"  # the sequence is not moved
    assert Message.objects.filter(enrollment=replied).count() == 1
    credential = campaign.credentials.get()
    credential.refresh_from_db()
    assert credential.sent_count == 2
    assert CredentialCampaignStats.objects.get().sends == 2
    assert usage_record_current(account=campaign.account, at=NOW).sends_count == 2
    [event] = [
        e.data
        for e in Event.objects.filter(type="enrollment.sent")
        if e.data["enrollment_id"] == str(replied.pk)
    ]
    assert (event["status"], event["replied_at"]) == ("replied", "2026-03-02T10:00:00.000000Z")
    warm.refresh_from_db()
    assert warm.status == "sent"


def test_a_send_of_a_new_period_makes_its_usage_record_first(sink, statements):
    campaign = _campaign(sink, steps=1)
    later = NOW + timedelta(days=31)  # April: no usage record yet
    first = _enroll(campaign, email="a@example.org")
    second = _enroll(campaign, email="b@example.org", at=later)
    _run()
    statements.clear()
    _run(now=later)

    assert statements == ["usage", "recorded"]
    assert usage_record_current(account=campaign.account, at=NOW).sends_count == 1
    assert usage_record_current(account=campaign.account, at=later).sends_count == 1
    assert Message.objects.filter(enrollment__in=[first, second]).count() == 2


def test_the_statement_makes_the_counters_a_first_send_needs_and_adds_to_them_after(
    sink, statements
):
    """A mailbox's first send in a campaign (its per-campaign row) and a step variant's
    first (its row) are made by the statement; later sends add to those rows."""
    first = _campaign(sink, steps=1)
    credential = first.credentials.get()
    _enroll(first, email="warm@example.org")
    _run()  # the account's usage record
    second = CampaignFactory(
        account=first.account, status="active", with_steps=1, with_credential=False
    )
    second.credentials.add(credential)
    for name in ("a", "b"):
        _enroll(second, email=f"{name}@example.org")
    statements.clear()

    _run()

    assert statements == ["recorded", "recorded"]
    stats = CredentialCampaignStats.objects.get(credential=credential, campaign=second)
    assert (stats.sends, stats.bounces) == (2, 0)
    assert stats_read(campaign_ids=[second.pk])[second.pk]["sent"] == 2
    variants = variant_stats_read(campaign_id=second.pk)
    assert {key: counts["sent"] for key, counts in variants.items()} == {(1, "A"): 2}
    assert CredentialCampaignStats.objects.get(campaign=first).sends == 1


def test_the_statement_keeps_non_ascii_values(smtp_sink, live_db, statements, drains):
    sink = smtp_sink()
    campaign = _campaign(sink, steps=1)
    first = _enroll(campaign, email="ann@example.org", first_name="Ann")
    zoe = _enroll(campaign, email="zoe@bücher.example", first_name="Zoë „Ω“")
    _run()

    assert statements == ["usage", "recorded", "recorded"]
    subjects = dict(Message.objects.values_list("enrollment_id", "subject"))
    assert subjects == {first.pk: "Hello Ann 1", zoe.pk: "Hello Zoë „Ω“ 1"}
    assert Message.objects.get(enrollment=zoe).text == "Step 1 for Acme"
    [event] = [
        e.data
        for e in Event.objects.filter(type="enrollment.sent")
        if e.data["enrollment_id"] == str(zoe.pk)
    ]
    assert event["contact_email"] == "zoe@bücher.example"


class _WorkerLost(BaseException):
    """The worker dies mid-transaction (nothing in the engine catches it)."""


def test_the_text_as_sent_is_kept_cut_on_every_record_path(sink, settings, monkeypatch):
    """The statement keeps the step's text as sent, cut at REPLY_BODY_MAX_CHARS, for an
    accepted message, a reply never seen and a send whose worker was lost (recorded
    from its claim)."""
    settings.REPLY_BODY_MAX_CHARS = 12
    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(sink, steps=1)
    _run()  # a first send: the period's usage record exists
    accepted = _enroll(campaign, email="ok@example.org", at=NOW + timedelta(seconds=1))
    unseen = _enroll(campaign, email="cut@example.org", at=NOW + timedelta(seconds=1))
    lost = _enroll(campaign, email="lost@example.org", at=NOW + timedelta(seconds=1))
    sink.drop_after_data("cut@example.org")
    real_transaction = batch.smtp_transaction

    def dies_on_lost(conn, sender, recipient, data, options):
        if recipient == "lost@example.org":
            raise _WorkerLost
        return real_transaction(conn, sender, recipient, data, options)

    monkeypatch.setattr(batch, "smtp_transaction", dies_on_lost)
    with pytest.raises(_WorkerLost):
        _run(NOW + timedelta(seconds=1))
    assert SendClaim.objects.get(enrollment=lost).text == "Step 1 for A"
    _run(NOW + timedelta(seconds=61))  # the lease lapsed: the lost send is recorded

    texts = {
        m.enrollment_id: (m.text, m.reply_seen)
        for m in Message.objects.filter(enrollment__in=[accepted, unseen, lost])
    }
    assert texts == {
        accepted.pk: ("Step 1 for A", True),
        unseen.pk: ("Step 1 for A", False),
        lost.pk: ("Step 1 for A", False),
    }
    # What went out is the whole text.
    assert "Step 1 for Acme" in sink.to("ok@example.org")[0].message.get_content()


def test_a_send_that_decides_a_branch_records_the_decision_then_the_statement(sink, statements):
    """The intro opened before the nudge went out: the nudge's send decides the branch
    after it at once. The decision (its row, its count, enrollment.branched) is written
    first, then the statement, in one transaction: one run, which applies."""
    campaign = graph_campaign(sink, NUDGE_THEN_BRANCH)
    start = timezone.now() - timedelta(hours=2)
    enrollment = enrolled(campaign, at=start)
    run(start)
    assert enrollment_mark_opened(enrollment_id=enrollment.pk, step=1)
    statements.clear()

    run(timezone.now())

    assert statements == ["recorded"]
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key, enrollment.path) == (
        "sent",
        "case_study",
        ["intro", "nudge", "wait"],
    )
    [decision] = BranchDecision.objects.filter(enrollment=enrollment)
    assert (decision.key, decision.outcome, decision.next_key) == ("wait", "then", "case_study")
    [counts] = branch_stats_read(campaign_id=campaign.pk, keys=["wait"])
    assert (counts["then_count"], counts["else_count"]) == (1, 0)
    events = Event.objects.filter(type__in=["enrollment.branched", "enrollment.sent"])
    assert [(e.type, e.data.get("next_key")) for e in events.order_by("created_at")] == [
        ("enrollment.sent", None),  # the intro
        ("enrollment.branched", "case_study"),
        ("enrollment.sent", None),  # the nudge
    ]
    assert Message.objects.filter(enrollment=enrollment).count() == 2
    assert stats_check(campaign_id=campaign.pk) == {}
