"""A simulator mailbox's outcomes (docs/sandbox.md, "Outcomes"): each made by the task
`outreach.simulator_outcome` as the input real mail brings, and each doing exactly what
the same input does through the real path: the pixel and click URLs fetched over HTTP,
the same message through the mailbox poll's own matching and keeping, the same
complaint posted by a relay provider."""

import email
import email.policy
import re
from datetime import UTC, datetime, time, timedelta

import pytest
from django.test import Client
from django.utils import timezone

from config.celery import app
from outreach.intake import simulated_mail as mail
from outreach.intake.inbound import Match, message_match, reply_keep
from outreach.intake.mailbox import mailbox_poll
from outreach.intake.simulator import first_tracked_link, pixel_token, simulator_outcomes_due
from outreach.models.contacts import Suppression
from outreach.models.conversations import Reply
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from tests.intake.conftest import requires_dovecot
from tests.intake.helpers import events
from tests.intake.relay_signing import MAILGUN_KEY, mailgun_body, mailgun_complained
from tests.intake.simulator import simulated_send
from tests.outreach.factories import CredentialFactory

pytestmark = pytest.mark.django_db
app.loader.import_default_modules()  # the tasks, by name, as a worker knows them


def run(message) -> str:
    """The task, by the name the send path queues it under."""
    return app.tasks["outreach.simulator_outcome"].delay(str(message.pk)).get()


def seen(enrollment) -> dict:
    """What a user sees of an enrollment after an outcome: its state, its contact's, the
    reply kept, the events fired for it."""
    enrollment.refresh_from_db()
    contact = enrollment.contact
    contact.refresh_from_db()
    reply = Reply.objects.filter(enrollment=enrollment).first()
    return {
        "status": enrollment.status,
        "opened": enrollment.opened_at is not None,
        "clicked_on": enrollment.clicked_on,
        "replied": enrollment.replied_at is not None,
        "bounce_reason": (enrollment.bounce_reason or "").replace(contact.email, "<to>"),
        "unsubscribed": contact.unsubscribed_at is not None,
        "suppressed": sorted(
            Suppression.objects.filter(
                account_id=contact.account_id, email_lower=contact.email_lower
            ).values_list("reason", flat=True)
        ),
        "reply": (reply.label, reply.returns_on, reply.new_text, reply.sender_verified)
        if reply
        else None,
        "events": [e.type for e in events() if e.data.get("enrollment_id") == str(enrollment.pk)],
    }


def sent_parts(data: bytes) -> tuple[str, str]:
    """The text and HTML parts of a message as sent."""
    parsed = email.message_from_bytes(data, policy=email.policy.default)
    text = parsed.get_body(preferencelist=("plain",)).get_content()
    html_part = parsed.get_body(preferencelist=("html",))
    return text, html_part.get_content() if html_part else ""


def pixel_path(data: bytes) -> str:
    return re.search(r'background="https?://[^/]+(/t/o/[^"]+\.gif)"', sent_parts(data)[1]).group(1)


# --- open and click ---------------------------------------------------------------------


def test_an_open_fetches_the_messages_own_pixel_as_a_mail_client_does():
    enrollment, message, data = simulated_send("open")
    twin, twin_message, twin_data = simulated_send("open")
    assert f"/t/o/{pixel_token(message)}.gif" == pixel_path(data)

    assert run(message) == "open: opened"
    assert Client().get(pixel_path(twin_data)).status_code == 200

    assert seen(enrollment) == seen(twin)
    assert seen(enrollment)["opened"] is True
    assert seen(enrollment)["events"] == ["enrollment.opened"]
    assert [e.data for e in events("enrollment.opened")][0].keys() == events("enrollment.opened")[
        1
    ].data.keys()


def test_an_open_made_twice_is_one_open():
    enrollment, message, _ = simulated_send("open")
    run(message)
    assert run(message) == "open: opened before"
    assert seen(enrollment)["events"] == ["enrollment.opened"]


@pytest.mark.parametrize("campaign", [{"track_opens": False}, {"html": False}])
def test_a_message_without_a_pixel_records_no_open(campaign):
    enrollment, message, data = simulated_send("open", **campaign)
    assert "/t/o/" not in data.decode()
    assert run(message) == "open: no open pixel in the message"
    assert seen(enrollment)["opened"] is False
    assert events() == []


def test_a_click_follows_the_first_tracked_link_of_the_message_with_an_open():
    enrollment, message, data = simulated_send("click", track_clicks=True)
    twin, _, twin_data = simulated_send("click", track_clicks=True)
    text, _ = sent_parts(data)
    first = re.search(r"https?://\S+?/t/c/\S+?(?=[\s.,]*(?:\s|$))", text).group(0)
    assert first_tracked_link(message).url == "https://acme.example/pricing"

    assert run(message) == "click: opened; clicked https://acme.example/pricing"
    twin_text, _ = sent_parts(twin_data)
    twin_link = re.search(r"https?://[^/\s]+(/t/c/\S+?)(?=[\s.,]*(?:\s|$))", twin_text).group(1)
    client = Client()
    client.get(pixel_path(twin_data))
    response = client.get(twin_link)
    assert response.status_code == 302
    assert response["Location"] == "https://acme.example/pricing"

    assert "/t/c/" in first
    assert seen(enrollment) == seen(twin)
    assert seen(enrollment)["clicked_on"] == "1A"
    assert run(message) == "click: opened before; clicked before https://acme.example/pricing"
    assert seen(enrollment)["events"] == ["enrollment.opened", "enrollment.clicked"]


def test_a_click_in_a_campaign_that_does_not_track_clicks_is_the_open_alone():
    enrollment, message, data = simulated_send("click")
    assert "/t/c/" not in data.decode()
    assert run(message) == "click: opened; no tracked link in the message"
    assert seen(enrollment)["opened"] is True
    assert seen(enrollment)["clicked_on"] == ""


# --- mail back: replies, notices, a delivery report --------------------------------------


def through_the_poll(message, raw: bytes):
    """What the mailbox poll does with one message it found (outreach.intake.mailbox:
    its header matched, a delivery report applied, a matched message kept)."""
    credential = SmtpCredential.objects.get(pk=message.credential_id)
    header = raw.split(b"\n\n", 1)[0]
    found = message_match(credential=credential, uid=7, raw=header, fetch_full=lambda: raw)
    if isinstance(found, Match):
        found = reply_keep(credential=credential, uid=7, match=found, raw=raw, validity=1)
    return found


@pytest.mark.parametrize("outcome", ["reply", "ooo", "autoreply", "remove", "dsn"])
def test_mail_back_does_what_the_same_message_does_through_the_mailbox_poll(outcome):
    enrollment, message, _ = simulated_send(outcome)
    twin, twin_message, _ = simulated_send(outcome)
    now = timezone.now()
    if outcome == "dsn":
        raw = mail.delivery_report(message=twin_message, now=now)
    else:
        raw = mail.contact_message(message=twin_message, outcome=outcome, now=now)

    waits = enrollment.next_send_at, twin.next_send_at

    run(message)
    through_the_poll(twin_message, raw)

    assert seen(enrollment) == seen(twin)
    # The next step moved (an out-of-office return) or not, alike.
    twin.refresh_from_db()
    enrollment.refresh_from_db()
    if outcome == "ooo":
        assert enrollment.next_send_at == twin.next_send_at != waits[0]
    else:
        assert (enrollment.next_send_at == waits[0]) == (twin.next_send_at == waits[1])


def test_a_reply_is_a_threaded_rfc_5322_message_quoting_the_sent_one():
    enrollment, message, _ = simulated_send("reply")
    raw = mail.contact_message(message=message, outcome="reply", now=timezone.now())
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed["From"] == "Ada Lovelace <ada+reply@simulator.test>"
    assert parsed["To"] == f"Sam Sender <{message.credential.from_email}>"
    assert parsed["Subject"] == "Re: Quick question about Acme"
    assert parsed["In-Reply-To"] == f"<{message.message_id}>"
    assert parsed["References"] == f"<{message.message_id}>"
    assert parsed["Date"] and parsed["Message-ID"] == f"<reply-{message.pk.hex}@simulator.test>"
    body = parsed.get_content().replace("\r\n", "\n")
    assert "wrote:\n\n> Hi Ada, see https://acme.example/pricing" in body

    assert run(message).startswith("reply: replied")
    seen_now = seen(enrollment)
    assert seen_now["status"] == "replied"
    assert seen_now["reply"][0] == ""  # an ordinary reply: no label
    assert seen_now["reply"][2].startswith("Thanks for reaching out")
    assert "> Hi Ada" not in seen_now["reply"][2]  # the quote is not the new text
    assert seen_now["events"] == ["enrollment.replied"]

    assert run(message).startswith("reply: ignored")  # the same message, kept once
    assert Reply.objects.count() == 1
    assert seen(enrollment)["events"] == ["enrollment.replied"]


def test_an_out_of_office_returns_seven_days_after_the_sends_utc_date():
    enrollment, message, _ = simulated_send("ooo")
    assert run(message).startswith("ooo: auto_reply out_of_office")
    returns = message.sent_at.astimezone(UTC).date() + timedelta(days=7)
    reply = Reply.objects.get(enrollment=enrollment)
    assert (reply.label, reply.returns_on) == ("out_of_office", returns)
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.SENT
    # The next step waits for the day after the return (the campaign's zone: UTC).
    assert enrollment.next_send_at == datetime.combine(
        returns + timedelta(days=1), time(0, 0), tzinfo=UTC
    )
    assert seen(enrollment)["events"] == []


def test_a_remove_me_request_unsubscribes_and_is_a_reply():
    enrollment, message, _ = simulated_send("remove")
    run(message)
    shown = seen(enrollment)
    assert shown["reply"][0] == "unsubscribe_request"
    assert (shown["status"], shown["unsubscribed"], shown["replied"]) == (
        "unsubscribed",
        True,
        True,
    )
    assert shown["events"] == ["enrollment.unsubscribed", "enrollment.replied"]


def test_a_delivery_report_bounces_the_message_it_names():
    enrollment, message, _ = simulated_send("dsn")
    raw = mail.delivery_report(message=message, now=timezone.now())
    parsed = email.message_from_bytes(raw, policy=email.policy.default)
    assert parsed.get_content_type() == "multipart/report"
    assert run(message).startswith("dsn: bounced 5.1.1")
    shown = seen(enrollment)
    assert shown["status"] == "bounced"
    assert shown["bounce_reason"] == (
        "5.1.1 550 5.1.1 <<to>>: Recipient address rejected: User unknown"
    )
    assert shown["events"] == ["enrollment.bounced"]
    assert run(message).startswith("dsn: ignored")
    assert seen(enrollment)["events"] == ["enrollment.bounced"]


# --- complaint ----------------------------------------------------------------------------


def test_a_complaint_does_what_a_relay_providers_complaint_does():
    enrollment, message, _ = simulated_send("complaint")
    twin, twin_message, _ = simulated_send("complaint")
    credential = SmtpCredential.objects.get(pk=twin_message.credential_id)
    credential.relay_provider = "mailgun"
    credential.relay_signing_key = MAILGUN_KEY
    credential.save()

    assert run(message) == "complaint: unsubscribed 1, ignored 0"
    body = mailgun_body(mailgun_complained(f"<{twin_message.message_id}>"))
    response = Client().post(
        f"/inbound/relay/{credential.pk}", data=body, content_type="application/json"
    )
    assert response.json()["unsubscribed"] == 1

    assert seen(enrollment) == seen(twin)
    assert seen(enrollment)["suppressed"] == ["complained"]
    assert seen(enrollment)["events"] == ["enrollment.unsubscribed"]
    assert run(message) == "complaint: unsubscribed 0, ignored 1"


# --- what makes no outcome; the task's name and queue; the sweep --------------------------


@pytest.mark.parametrize("address_outcome", ["", "bounce", "unknown", "nonsense"])
def test_other_recipients_have_no_later_outcome(address_outcome):
    enrollment, message, _ = simulated_send(address_outcome or "x")
    if not address_outcome:
        message.to_email = "ada@simulator.test"
        message.save()
    assert run(message).startswith("no later outcome")
    assert events() == [] and Reply.objects.count() == 0


def test_a_real_mailboxs_message_is_never_simulated():
    enrollment, message, _ = simulated_send("reply")
    real = CredentialFactory(account=enrollment.campaign.account)
    message.credential = real
    message.save()
    assert run(message) == "not a simulator's message"
    assert app.tasks["outreach.simulator_outcome"].delay("not-an-id").get() == "not a message id"
    assert Reply.objects.count() == 0


def test_the_task_runs_on_the_intake_queue():
    assert app.amqp.router.route({}, "outreach.simulator_outcome")["queue"].name == "intake"


def test_the_sweep_finds_a_simulators_send_whose_outcome_was_not_made(settings):
    settings.SIMULATOR_DELAY_SECONDS = 5
    enrollment, message, _ = simulated_send("reply")
    delivered, delivered_message, _ = simulated_send("x")
    now = timezone.now()
    for sent in (message, delivered_message):
        SendClaim.objects.create(
            enrollment_id=sent.enrollment_id,
            batch_id=sent.pk,
            credential_id=sent.credential_id,
            step=1,
            claimed_at=now - timedelta(seconds=30),
            lease_until=now,
            sending_at=now - timedelta(seconds=30),
            finished_at=now - timedelta(seconds=20),
            outcome=SendClaim.Outcome.SENT,
            message_id=sent.message_id,
            to_email=sent.to_email,
        )
    assert simulator_outcomes_due(now=now - timedelta(seconds=18)) == []  # not late yet
    assert simulator_outcomes_due(now=now) == [str(message.pk)]

    assert app.tasks["outreach.tasks.intake_simulator_sweep"].delay().get() == 1
    assert seen(enrollment)["status"] == "replied"
    assert simulator_outcomes_due(now=now) == []


@requires_dovecot
@pytest.mark.parametrize("outcome", ["reply", "ooo", "autoreply", "remove", "dsn"])
def test_mail_back_does_what_the_same_message_does_in_a_real_mailbox(outcome, imap_mailbox):
    """The same message delivered to a real IMAP server (Dovecot) and found by the poll."""
    enrollment, message, _ = simulated_send(outcome)
    twin, twin_message, _ = simulated_send(outcome)
    credential = SmtpCredential.objects.get(pk=twin_message.credential_id)
    credential.auth_method = SmtpCredential.AuthMethod.PASSWORD
    credential.smtp_host = "smtp.example.com"
    credential.imap_host = imap_mailbox.host
    credential.imap_port = imap_mailbox.port
    credential.imap_username = imap_mailbox.username
    credential.imap_password = imap_mailbox.password
    credential.imap_security = "none"
    credential.save()
    now = timezone.now()
    if outcome == "dsn":
        raw = mail.delivery_report(message=twin_message, now=now)
    else:
        raw = mail.contact_message(message=twin_message, outcome=outcome, now=now)

    run(message)
    imap_mailbox.append(raw)
    assert mailbox_poll(credential=credential).error == ""

    assert seen(enrollment) == seen(twin)


def test_the_sweep_with_nothing_late_is_one_query(django_assert_num_queries):
    simulated_send("reply")  # sent, its attempt not recorded late
    with django_assert_num_queries(1):
        assert simulator_outcomes_due() == []
