"""Simulator mailboxes in the sending engine (docs/sandbox.md): each SMTP-stage outcome
of the mailbox simulator is handled exactly as the same answer from a real server (the
SMTP sink, tests/support/smtp.py); a simulator never connects; its sends are recorded
as any send, not metered, and capped by SIMULATOR_DAILY_LIMIT."""

from datetime import UTC, datetime, timedelta

import pytest

from billing.usage import usage_record_current
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import CredentialCampaignStats, Enrollment, Message, SendClaim
from outreach.sending import simulator
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from webhooks.models import Event

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _text(reply: tuple[int, bytes]) -> str:
    return f"{reply[0]} {reply[1].decode()}"


def simulator_mailbox(account, **extra) -> SmtpCredential:
    return CredentialFactory(
        account=account,
        auth_method=SmtpCredential.AuthMethod.SIMULATOR,
        smtp_host="",
        smtp_username="",
        smtp_password="",
        **extra,
    )


def simulated_campaign(*, steps=1, **kwargs) -> Campaign:
    campaign = CampaignFactory(
        with_steps=steps, with_credential=False, status=Campaign.Status.ACTIVE, **kwargs
    )
    campaign.credentials.add(simulator_mailbox(campaign.account))
    return campaign


def _real_campaign(sink, *, steps=1) -> Campaign:
    campaign = CampaignFactory(with_steps=steps, status=Campaign.Status.ACTIVE)
    SmtpCredential.objects.filter(campaigns=campaign).update(
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="",
        smtp_password="",
    )
    return campaign


def enroll(campaign, email: str, *, at=NOW) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, email=email),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
    )


def run(now=NOW) -> list:
    """One scheduler tick at `now`, then every batch it claimed, sent with that clock."""
    return [
        batch_send(batch_id=b.batch_id, credential_id=b.credential_id, clock=lambda: now)
        for b in schedule_due(now=now)
    ]


def _digest(enrollment: Enrollment) -> dict:
    """What a user sees of one enrollment's sends: its state, its attempts, its
    messages, its mailbox's counts and its events (addresses and ids left out)."""
    enrollment.refresh_from_db()
    credential = SmtpCredential.objects.get(campaigns=enrollment.campaign_id)
    stats = CredentialCampaignStats.objects.filter(credential=credential).first()
    attempts = SendClaim.objects.filter(enrollment=enrollment).order_by("claimed_at", "pk")
    events = Event.objects.filter(account_id=enrollment.campaign.account_id).order_by("created_at")
    return {
        "status": enrollment.status,
        "current_step": enrollment.current_step,
        "send_attempts": enrollment.send_attempts,
        "last_error": enrollment.last_error,
        "bounce_reason": enrollment.bounce_reason,
        "next_send_at": enrollment.next_send_at,
        "contact_bounced": enrollment.contact.bounced_at is not None,
        "attempts": [
            # An accepted message's reply text is the server's own words.
            (
                a.outcome,
                a.reply_code,
                a.reply_text if a.outcome != "sent" else "",
                a.outcome_unknown,
            )
            for a in attempts
        ],
        "messages": [m.reply_seen for m in Message.objects.filter(enrollment=enrollment)],
        "credential": (
            credential.sent_count,
            credential.bounced_count,
            credential.daily_sent_count,
        ),
        "stats": (stats.sends, stats.bounces) if stats else None,
        "events": [(e.type, e.data.get("status"), e.data.get("bounce_reason")) for e in events],
    }


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


# --- each SMTP-stage outcome, as from a real server ------------------------------------


@pytest.mark.parametrize(
    ("outcome", "reply"),
    [("bounce", simulator.BOUNCE_REPLY), ("block", simulator.BLOCK_REPLY)],
)
def test_a_refusal_at_rcpt_is_handled_as_the_same_refusal_from_a_server(sink, outcome, reply):
    real = _real_campaign(sink)
    sink.reject_rcpt("gone@example.org", _text(reply))
    real_one = enroll(real, "gone@example.org")
    simulated_one = enroll(simulated_campaign(), f"ada+{outcome}@simulator.test")

    run()

    expected = _digest(real_one)
    assert expected["status"] == "bounced"
    assert expected["bounce_reason"] == _text(reply)
    assert _digest(simulated_one) == expected


def test_a_softbounce_is_deferred_then_accepted_as_a_server_saying_452_once(sink, settings):
    settings.SENDING_RETRY_SCHEDULE = [60, 600]
    real = _real_campaign(sink, steps=2)
    sink.reject_rcpt("busy@example.org", _text(simulator.SOFTBOUNCE_REPLY), times=1)
    real_one = enroll(real, "busy@example.org")
    simulated_one = enroll(simulated_campaign(steps=2), "ada+softbounce@simulator.test")

    run()
    after_first = _digest(real_one)
    assert (after_first["status"], after_first["send_attempts"]) == ("scheduled", 1)
    assert after_first["next_send_at"] == NOW + timedelta(seconds=60)
    assert _digest(simulated_one) == after_first

    run(NOW + timedelta(seconds=60))
    accepted = _digest(real_one)
    assert (accepted["status"], accepted["send_attempts"], accepted["last_error"]) == (
        "sent",
        0,
        "",
    )
    assert _digest(simulated_one) == accepted
    # Each step's first attempt is refused: the next step's too.
    sink.reject_rcpt("busy@example.org", _text(simulator.SOFTBOUNCE_REPLY), times=1)
    later = accepted["next_send_at"]
    run(later)
    assert _digest(simulated_one) == _digest(real_one)
    assert _digest(real_one)["send_attempts"] == 1


def test_no_answer_to_the_final_dot_counts_as_sent_as_a_dropped_connection(sink):
    real = _real_campaign(sink)
    sink.drop_after_data("cut@example.org")
    real_one = enroll(real, "cut@example.org")
    simulated_one = enroll(simulated_campaign(), "ada+unknown@simulator.test")

    run()

    expected = _digest(real_one)
    assert expected["status"] == "completed"
    assert expected["messages"] == [False]
    assert expected["attempts"][0][3] is True  # the outcome unknown
    assert _digest(simulated_one) == expected
    assert run(NOW + timedelta(minutes=30)) == []  # never sent again


@pytest.mark.parametrize("address", ["ada@simulator.test", "ada+open@simulator.test", "x@y.org"])
def test_an_accepted_message_is_recorded_as_any_send(sink, address):
    real = _real_campaign(sink)
    real_one = enroll(real, "fine@example.org")
    simulated_one = enroll(simulated_campaign(), address)

    run()

    expected = _digest(real_one)
    assert expected["status"] == "completed"
    assert [e[0] for e in expected["events"]] == ["enrollment.sent"]
    assert _digest(simulated_one) == expected
    [attempt] = SendClaim.objects.filter(enrollment=simulated_one)
    assert attempt.reply_text == _text(simulator.ACCEPTED_REPLY)
    assert len(sink.messages) == 1  # the real one's only


# --- no connection, ever ----------------------------------------------------------------


def test_a_campaign_of_every_outcome_never_connects(
    settings, monkeypatch, connect_attempts, django_capture_on_commit_callbacks
):
    """The outbound guard refuses every address; the simulator's campaign runs to its
    end (retries included) and no connection is even tried."""
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    monkeypatch.setattr("config.outbound.address_refusal", lambda ip: "refused by the test")
    settings.SENDING_RETRY_SCHEDULE = [60]
    queued = []
    monkeypatch.setattr(
        simulator.current_app,
        "signature",
        lambda name: type(
            "Sig", (), {"apply_async": lambda self, args, **kw: queued.append((name, args))}
        )(),
    )
    campaign = simulated_campaign(steps=2)
    for step in campaign.steps.all():
        step.delay_minutes = 0
        step.save()
    enrollments = {
        outcome: enroll(campaign, f"ada+{outcome}@simulator.test")
        for outcome in ("delivered", "open", "click", "reply", "ooo", "autoreply", "remove")
        + ("bounce", "softbounce", "dsn", "block", "complaint", "unknown")
    }
    enrollments["plain"] = enroll(campaign, "someone@example.org")

    with django_capture_on_commit_callbacks(execute=True):
        for minute in range(4):
            run(NOW + timedelta(minutes=minute))

    assert connect_attempts == []
    status = {
        outcome: e.status
        for outcome, e in ((o, Enrollment.objects.get(pk=e.pk)) for o, e in enrollments.items())
    }
    assert status["bounce"] == status["block"] == "bounced"
    assert {status[o] for o in enrollments if o not in ("bounce", "block")} == {"completed"}
    # The outcomes that happen after the SMTP stage are queued by name, per message.
    played = {
        Message.objects.get(pk=args[0]).to_email.split("+")[1].split("@")[0] for _, args in queued
    }
    assert {name for name, _ in queued} == {simulator.OUTCOME_TASK}
    assert played == {"open", "click", "reply", "ooo", "autoreply", "remove", "dsn", "complaint"}
    assert len(queued) == 2 * 8  # each of their two messages


# --- usage and the account's day --------------------------------------------------------


def test_simulator_sends_are_recorded_but_not_metered(sink):
    real = _real_campaign(sink)
    enroll(real, "fine@example.org")
    campaign = simulated_campaign()
    one = enroll(campaign, "ada@simulator.test")
    two = enroll(campaign, "bo+reply@simulator.test")

    run()

    assert {e.status for e in Enrollment.objects.filter(pk__in=[one.pk, two.pk])} == {"completed"}
    assert Message.objects.filter(enrollment__campaign=campaign).count() == 2
    assert usage_record_current(account=campaign.account, at=NOW).sends_count == 0
    assert usage_record_current(account=real.account, at=NOW).sends_count == 1


def test_past_the_simulator_daily_limit_sends_wait_for_the_next_day(settings):
    settings.SIMULATOR_DAILY_LIMIT = 2
    campaign = simulated_campaign()
    other = simulator_mailbox(campaign.account)  # the limit is the account's, not a mailbox's
    second = CampaignFactory(
        account=campaign.account, with_credential=False, status=Campaign.Status.ACTIVE
    )
    second.credentials.add(other)
    first_two = [enroll(campaign, f"a{n}@simulator.test") for n in range(2)]
    third = enroll(second, "c@simulator.test")

    run()

    assert {e.status for e in Enrollment.objects.filter(pk__in=[e.pk for e in first_two])} == {
        "completed"
    }
    third.refresh_from_db()
    assert third.status == "scheduled"
    assert third.next_send_at == datetime(2026, 3, 3, tzinfo=UTC)
    run(datetime(2026, 3, 3, tzinfo=UTC))
    third.refresh_from_db()
    assert third.status == "completed"


def test_the_simulator_day_does_not_hold_a_real_mailbox(sink, settings):
    settings.SIMULATOR_DAILY_LIMIT = 0
    real = _real_campaign(sink)
    real_one = enroll(real, "fine@example.org")
    simulated_one = enroll(simulated_campaign(), "ada@simulator.test")
    run()
    real_one.refresh_from_db()
    simulated_one.refresh_from_db()
    assert (real_one.status, simulated_one.status) == ("completed", "scheduled")


@pytest.mark.parametrize("address", ["ada@simulator.test", "Ada+Open@Simulator.TEST"])
def test_a_real_mailbox_never_sends_to_a_simulator_address(sink, address):
    """Every way in refuses one (test_simulator_api.py); were one there all the same,
    the send fails without a word to the server."""
    real = _real_campaign(sink)
    one = enroll(real, address)
    run()
    one.refresh_from_db()
    assert one.status == "failed"
    assert "simulator" in one.last_error
    assert sink.messages == []


@pytest.mark.parametrize("address", ["ada@simulator.test.example.org", "ada@notsimulator.test"])
def test_an_address_only_like_the_simulators_goes_to_the_real_server(sink, address):
    one = enroll(_real_campaign(sink), address)
    run()
    one.refresh_from_db()
    assert one.status == "completed"
    assert [m.rcpt_tos for m in sink.messages] == [[address]]


def test_its_own_bounces_disable_it_and_pause_the_campaign(settings):
    """credential.disabled and campaign.paused, simulated: the bounce rate is the
    simulator's own in the campaign, as any mailbox's."""
    from outreach.sending.bounces import BOUNCE_RATE_MIN_SENDS

    campaign = simulated_campaign(bounce_threshold_percent=10)
    simulator_box = campaign.credentials.get()
    for n in range(BOUNCE_RATE_MIN_SENDS):
        enroll(campaign, f"a{n}+bounce@simulator.test")

    run()

    simulator_box.refresh_from_db()
    assert simulator_box.disabled_reason == "bounce_rate_exceeded"
    assert Campaign.objects.get(pk=campaign.pk).status == "paused"
    types = set(Event.objects.values_list("type", flat=True))
    assert {"credential.disabled", "campaign.paused"} <= types
