"""The record of an accepted message on PostgreSQL is one statement (outreach.record_sql);
everywhere else, and whenever that statement does not apply, the ORM path. Both must
leave exactly the same rows, events and delivery jobs."""

import contextlib
import smtplib
from datetime import timedelta

import pytest
from django.db import connection

from billing.services import usage_record_current
from outreach import record_sql, sending
from outreach.models import Campaign, CredentialCampaignStats, Enrollment, Message, SendClaim
from outreach.scheduler import schedule_due
from tests.outreach.test_sending import NOW, _campaign, _enroll, _run
from webhooks.models import DeliveryJob, Event, Webhook
from webhooks.secrets import secret_encrypt, secret_generate
from webhooks.tasks import webhook_drain

pytestmark = pytest.mark.django_db

needs_postgres = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="the one-statement record is PostgreSQL's"
)


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


@pytest.fixture
def statements(monkeypatch):
    """How the statement path answered: True (recorded), False (fell back to the ORM)."""
    answers = []
    real = record_sql.Prepared.start

    def counting(self, **kwargs):
        pending = real(self, **kwargs)
        result = pending.result

        def answered():
            recorded = result()
            answers.append(recorded is not None)
            return recorded

        pending.result = answered
        return pending

    monkeypatch.setattr(record_sql.Prepared, "start", counting)
    return answers


@pytest.fixture
def drains(monkeypatch):
    """The drain messages put on the broker (webhook ids), instead of running them."""
    sent = []
    monkeypatch.setattr(webhook_drain, "apply_async", lambda args, **kw: sent.append(args[0]))
    return sent


def _webhook(account, filters, *, disabled=False):
    return Webhook.objects.create(
        account=account,
        url="https://receiver.example/hook",
        event_filters=filters,
        secret_encrypted=secret_encrypt(secret_generate()),
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
            (order[str(m.enrollment_id)], m.step, m.to_email, m.subject, m.sent_at)
            for m in Message.objects.filter(account=campaign.account)
        ),
        "message_credentials": {
            ids[str(pk)]
            for pk in Message.objects.filter(account=campaign.account).values_list(
                "credential_id", flat=True
            )
        },
        "claims": SendClaim.objects.filter(credential=credential).count(),
        "sent_count": credential.sent_count,
        "stats": list(
            CredentialCampaignStats.objects.filter(campaign=campaign).values_list(
                "sends", "bounces"
            )
        ),
        "usage": usage_record_current(account=campaign.account, at=NOW).sends_count,
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


@needs_postgres
def test_the_statement_leaves_the_same_rows_as_the_orm_path(
    sink, statements, drains, monkeypatch, django_capture_on_commit_callbacks
):
    campaign, hooks, enrollments = _scenario(sink, django_capture_on_commit_callbacks)
    fast = _snapshot(campaign, hooks, enrollments)
    # The first send of the campaign creates its stats row: the ORM path; then statements.
    assert statements == [False, True, True]
    # One drain message per webhook that wants the event, not one per event.
    assert sorted(drains) == sorted([str(hooks["all"].pk), str(hooks["sent"].pk)])

    # The same scenario again with the statement switched off.
    Event.objects.all().delete()
    monkeypatch.setattr(record_sql, "supported", lambda: False)
    statements.clear()
    drains.clear()
    slow = _snapshot(*_scenario(sink, django_capture_on_commit_callbacks))
    assert statements == []
    assert len(drains) == 2

    assert fast == slow
    assert (fast["usage"], fast["sent_count"], fast["stats"]) == (3, 3, [(3, 0)])
    assert len(fast["jobs"]) == 6  # three events, two webhooks want them
    assert {name for _, name, _ in fast["jobs"]} == {"all", "sent"}
    assert fast["rung"] == ["all", "sent"]
    assert fast["jobs_due_when_emitted"]
    assert [e["status"] for e in fast["enrollments"]] == ["sent"] * 3


@needs_postgres
def test_an_enrollment_changed_since_its_claim_falls_back_and_writes_once(
    sink, statements, drains, monkeypatch
):
    """A reply between the claim and the record: the statement does not apply (nothing
    half written); the ORM path records the message and emits the enrollment as it is."""
    campaign = _campaign(sink, steps=2)
    warm = _enroll(campaign, email="warm@example.org")
    _run()  # creates the per-campaign stats row: later sends can use the statement
    replied = _enroll(campaign, email="replied@example.org")
    real_sendmail = __import__("smtplib").SMTP.sendmail

    def reply_during_send(self, *args, **kwargs):
        answer = real_sendmail(self, *args, **kwargs)
        Enrollment.objects.filter(pk=replied.pk).update(status="replied", replied_at=NOW)
        return answer

    monkeypatch.setattr("smtplib.SMTP.sendmail", reply_during_send)
    statements.clear()
    _run()

    assert statements == [False]
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


@needs_postgres
def test_a_send_of_a_new_period_falls_back_to_create_its_usage_record(sink, statements):
    campaign = _campaign(sink, steps=1)
    later = NOW + timedelta(days=31)  # April: no usage record yet
    first = _enroll(campaign, email="a@example.org")
    second = _enroll(campaign, email="b@example.org", at=later)
    _run()
    statements.clear()
    _run(now=later)

    assert statements == [False]
    assert usage_record_current(account=campaign.account, at=NOW).sends_count == 1
    assert usage_record_current(account=campaign.account, at=later).sends_count == 1
    assert Message.objects.filter(enrollment__in=[first, second]).count() == 2


@needs_postgres
def test_outside_a_transaction_the_statement_overlaps_the_next_build(
    smtp_sink, live_db, statements, drains, monkeypatch
):
    """A worker's case (no transaction open): each record goes out without waiting, the
    next message is built meanwhile, and its answer is read before the next send."""
    sink = smtp_sink()
    events = []
    real_build = sending.message_build

    def build(**kwargs):
        events.append(("build", kwargs["enrollment"].contact.email))
        return real_build(**kwargs)

    real_sendmail = smtplib.SMTP.sendmail

    def sendmail(self, from_addr, to_addrs, *args, **kwargs):
        # Every earlier message is committed before this one goes out.
        events.append(("send", to_addrs[0], Message.objects.count()))
        return real_sendmail(self, from_addr, to_addrs, *args, **kwargs)

    monkeypatch.setattr(sending, "message_build", build)
    monkeypatch.setattr(smtplib.SMTP, "sendmail", sendmail)
    campaign, hooks, enrollments = _scenario(sink, contextlib.nullcontext)

    assert statements == [False, True, True]
    # build, send, then the next build while that send's record is in flight; each send
    # only once every earlier message is committed.
    assert [e[0] for e in events] == ["build", "send"] * 3
    assert [e[2] for e in events if e[0] == "send"] == [0, 1, 2]
    assert [e[1] for e in events[0::2]] == [e[1] for e in events[1::2]]
    snapshot = _snapshot(campaign, hooks, enrollments)
    assert (snapshot["usage"], snapshot["sent_count"], snapshot["stats"]) == (3, 3, [(3, 0)])
    assert len(snapshot["jobs"]) == 6
    assert snapshot["claims"] == 0
    assert sorted(drains) == sorted([str(hooks["all"].pk), str(hooks["sent"].pk)])
    assert len(sink.messages) == 3


@needs_postgres
def test_a_prepared_statement_lost_by_the_connection_is_prepared_again(
    smtp_sink, live_db, statements, drains
):
    sink = smtp_sink()
    campaign = _campaign(sink, steps=1)
    enrollments = [_enroll(campaign, email=f"p{i}@example.org") for i in range(3)]
    after = NOW + timedelta(minutes=1)
    later = [_enroll(campaign, email=f"q{i}@example.org", at=after) for i in range(2)]
    _run()  # prepares the statement on this connection
    with connection.cursor() as cursor:
        cursor.execute("DEALLOCATE ALL")  # what a pooler's reset would do
    statements.clear()
    _run(now=after)

    assert statements == [True, True]
    assert Message.objects.filter(enrollment__in=enrollments + later).count() == 5
    assert usage_record_current(account=campaign.account, at=after).sends_count == 5


@needs_postgres
def test_the_statement_keeps_non_ascii_values(smtp_sink, live_db, statements, drains):
    sink = smtp_sink()
    campaign = _campaign(sink, steps=1)
    first = _enroll(campaign, email="ann@example.org", first_name="Ann")
    zoe = _enroll(campaign, email="zoe@bücher.example", first_name="Zoë „Ω“")
    _run()

    assert sorted(statements) == [False, True]
    subjects = dict(Message.objects.values_list("enrollment_id", "subject"))
    assert subjects == {first.pk: "Hello Ann 1", zoe.pk: "Hello Zoë „Ω“ 1"}
    [event] = [
        e.data
        for e in Event.objects.filter(type="enrollment.sent")
        if e.data["enrollment_id"] == str(zoe.pk)
    ]
    assert event["contact_email"] == "zoe@bücher.example"


def test_preparing_a_record_touches_neither_the_database_nor_the_enrollment(
    sink, django_assert_num_queries
):
    """A worker prepares a message's record while the previous statement is in flight:
    no query may go out then, and nothing may change before the server accepts it."""
    campaign = _campaign(sink, steps=2)
    enrollment = _enroll(campaign)
    [batch] = schedule_due(now=NOW)
    claim = SendClaim.objects.select_related("enrollment__contact").get(batch_id=batch.batch_id)
    campaign = Campaign.objects.select_related("account").get(pk=campaign.pk)
    claim.enrollment.campaign = campaign
    steps = {s.position: s for s in campaign.steps.all()}
    outgoing = sending.message_build(
        credential=campaign.credentials.get(),
        campaign=campaign,
        step=steps[1],
        enrollment=claim.enrollment,
        thread=[],
        first_subject="",
        now=NOW,
    )
    credential = campaign.credentials.get()
    before = dict(vars(claim.enrollment))
    with django_assert_num_queries(0):
        start = sending._record_sent_prepare(
            claim=claim,
            enrollment=claim.enrollment,
            campaign=campaign,
            credential=credential,
            steps=steps,
            outgoing=outgoing,
            now=NOW,
        )
    assert vars(claim.enrollment) == before
    assert start(None)() is False  # recorded (no next claim to mark)
    claim.enrollment.refresh_from_db()
    assert (claim.enrollment.status, claim.enrollment.current_step) == ("sent", 1)
    assert Message.objects.get(enrollment=enrollment).message_id == outgoing.message_id
