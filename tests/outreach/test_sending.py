"""The sending engine against a real SMTP server (aiosmtpd, tests/support/smtp.py):
scheduler decisions with a controllable clock, the messages on the wire, and what each
SMTP outcome records."""

import uuid
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.services import api_key_create
from billing.models import UsageRecord
from billing.usage import usage_record_current
from outreach.campaigns import rendering
from outreach.mailboxes.check import credential_verify
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import CredentialCampaignStats, Enrollment, Message, SendClaim
from outreach.sending import message, tokens
from outreach.sending.record import INTERRUPTED_ERROR
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send, mailboxes_send
from tests.conftest import client_for
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.outreach.helpers import assert_error
from tests.support.usage import usage_set
from webhooks.models import Event

# A Monday, 10:00 UTC.
NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)

pytestmark = pytest.mark.django_db


def _events(event_type: str) -> list[dict]:
    return [e.data for e in Event.objects.filter(type=event_type).order_by("created_at")]


def _point_at(credential: SmtpCredential, sink, **extra) -> SmtpCredential:
    credential.smtp_host = sink.host
    credential.smtp_port = sink.port
    credential.smtp_security = extra.pop("security", "none")
    for name, value in extra.items():
        setattr(credential, name, value)
    credential.save()
    return credential


def _campaign(sink, *, steps=1, **kwargs) -> Campaign:
    campaign = CampaignFactory(with_steps=steps, status=Campaign.Status.ACTIVE, **kwargs)
    _point_at(campaign.credentials.get(), sink, smtp_username="", smtp_password="")
    return campaign


def _more_mailboxes(campaign, sink, count: int) -> list[SmtpCredential]:
    """`count` more mailboxes on the campaign, sending to `sink`."""
    added = [
        _point_at(CredentialFactory(account=campaign.account), sink, smtp_username="")
        for _ in range(count)
    ]
    campaign.credentials.add(*added)
    return added


def _enroll(campaign, *, at=NOW, **contact) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, **contact),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
    )


def _run(now=NOW) -> list:
    """One scheduler tick at `now`, then every batch it claimed, sent with that clock."""
    batches = schedule_due(now=now)
    return [
        batch_send(batch_id=b.batch_id, credential_id=b.credential_id, clock=lambda: now)
        for b in batches
    ]


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


# --- on the wire ---------------------------------------------------------------------------


def test_it_sends_a_personalised_message_with_the_headers(sink, settings):
    campaign = _campaign(sink)
    CampaignStep.objects.filter(campaign=campaign).update(
        body_html="<html><body><p>Hi {{first_name}} &amp; {{company}}</p></body></html>"
    )
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(from_name="Sam Sender")
    enrollment = _enroll(campaign, email="ada@example.org", first_name="Ada", company="<Acme>")

    [result] = _run()

    assert result.sent == 1
    [received] = sink.messages
    assert received.rcpt_tos == ["ada@example.org"]
    assert received.mail_from == credential.from_email
    msg = received.message
    assert msg["Subject"] == "Hello Ada 1"
    assert msg["From"] == f"Sam Sender <{credential.from_email}>"
    assert msg["To"] == "Ada <ada@example.org>"
    stored = Message.objects.get(enrollment=enrollment)
    assert msg["Message-ID"] == f"<{stored.message_id}>"
    assert stored.message_id.endswith("@example.com")  # the sender's domain
    unsubscribe = tokens.token_make(
        purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk, contact_id=enrollment.contact_id
    )
    assert msg["List-Unsubscribe"] == (
        f"<http://testserver/u/{unsubscribe}>, <mailto:{credential.from_email}?subject=unsubscribe>"
    )
    # On the wire as RFC 2369 wants it: plain URLs in angle brackets on one line, never
    # RFC 2047 encoded words (mail clients would not find the links).
    assert (
        f"\r\nList-Unsubscribe: <http://testserver/u/{unsubscribe}>, "
        f"<mailto:{credential.from_email}?subject=unsubscribe>\r\n"
    ).encode() in received.data
    assert msg["List-Unsubscribe-Post"] == "List-Unsubscribe=One-Click"
    assert msg["X-Auto-Response-Suppress"] == "OOF, AutoReply"
    assert msg["In-Reply-To"] is None
    assert msg.get_body(("plain",)).get_content().strip() == "Step 1 for <Acme>"
    html = msg.get_body(("html",)).get_content()
    assert "<p>Hi Ada &amp; &lt;Acme&gt;</p>" in html
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk, step=1)
    assert f'background="http://testserver/t/o/{pixel}.gif"' in html
    assert html.index("<table") < html.index("</body>")


def test_it_sends_text_only_without_html_and_no_pixel_without_tracking(sink):
    campaign = _campaign(sink, track_opens=False)
    _enroll(campaign)
    EnrollmentFactory(campaign=campaign)  # pending: keeps the campaign active
    _run()
    msg = sink.messages[0].message
    assert msg.get_content_type() == "text/plain"
    CampaignStep.objects.filter(campaign=campaign).update(body_html="<p>Hi</p>")
    _enroll(campaign)
    _run()
    html = sink.messages[1].message.get_body(("html",)).get_content()
    assert "/t/o/" not in html


def test_it_threads_follow_ups_with_an_empty_subject(sink):
    campaign = _campaign(sink, steps=3)
    CampaignStep.objects.filter(campaign=campaign, position__gt=1).update(delay_minutes=0)
    enrollment = _enroll(campaign, first_name="Grace")

    for _ in range(3):
        _run()

    first, second, third = (r.message for r in sink.messages)
    assert first["Subject"] == "Hello Grace 1"
    assert second["Subject"] == third["Subject"] == "Re: Hello Grace 1"
    ids = list(
        Message.objects.filter(enrollment=enrollment)
        .order_by("step")
        .values_list("message_id", flat=True)
    )
    assert second["In-Reply-To"] == f"<{ids[0]}>"
    assert second["References"] == f"<{ids[0]}>"
    assert third["In-Reply-To"] == f"<{ids[1]}>"
    assert third["References"] == f"<{ids[0]}> <{ids[1]}>"
    assert len(set(ids)) == 3


def test_a_batch_reads_earlier_messages_only_for_replies(sink):
    from django.test.utils import CaptureQueriesContext

    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    _enroll(campaign)
    with CaptureQueriesContext(connection) as queries:
        [result] = _run()
    assert result.sent == 1
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "outreach_message"' in q["sql"]]
    assert reads == []  # a first message starts its thread: nothing to read
    with CaptureQueriesContext(connection) as queries:
        [result] = _run()
    assert result.sent == 1
    reads = [q["sql"] for q in queries.captured_queries if 'FROM "outreach_message"' in q["sql"]]
    assert len(reads) == 1  # the reply reads its thread
    assert sink.messages[1].message["In-Reply-To"] == sink.messages[0].message["Message-ID"]


# A message's statements: its claim marked started, and its record in one statement
# within its own transaction (here a savepoint and its release).
PER_MESSAGE = 4


def test_a_batch_reads_twice_and_then_a_fixed_number_of_statements_per_message(sink):
    """A batch loads what it sends with in two queries (the claims with their
    enrollment, contact, campaign, account and mailbox; the steps), then costs the same
    few statements per message: a paced mailbox's batch is one message, so whatever a
    batch adds is paid per message by a fleet. A batch that ended no enrollment does
    not look for campaigns to complete."""
    from django.test.utils import CaptureQueriesContext

    campaign = _campaign(sink, steps=2)  # its step 2 is days away: it stays active
    _enroll(campaign)
    _run()  # the first message creates the period's usage row and the stats rows

    def batch_queries(contacts: int) -> list[str]:
        for _ in range(contacts):
            _enroll(campaign)
        [claimed] = schedule_due(now=NOW)
        with CaptureQueriesContext(connection) as queries:
            result = batch_send(
                batch_id=claimed.batch_id, credential_id=claimed.credential_id, clock=lambda: NOW
            )
        assert result.sent == contacts
        return [q["sql"] for q in queries.captured_queries]

    one, three = batch_queries(1), batch_queries(3)
    reads = [sql for sql in one if sql.lstrip().startswith("SELECT")]
    assert len(reads) == 2
    assert len(one) == 2 + PER_MESSAGE
    assert len(three) - len(one) == 2 * PER_MESSAGE


def test_one_task_loads_its_mailboxes_batches_together_and_completes_once(sink):
    """A sending task carries several mailboxes' batches: they are loaded in the same
    queries, whatever their number, and the campaigns their last steps ended are
    looked at once, after all of them."""
    from django.test.utils import CaptureQueriesContext

    campaign = _campaign(sink, steps=2)  # step 2 at once; it ends its enrollment
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    first = campaign.credentials.get()
    others = _more_mailboxes(campaign, sink, 2)
    for _ in range(3):
        _enroll(campaign)
    # Step 1: the period's usage row, each mailbox's stats rows; step 2 is measured.
    assert sum(r.sent for r in _run()) == 3
    batches = schedule_due(now=NOW)
    assert {b.credential_id for b in batches} == {first.pk, *(c.pk for c in others)}

    with CaptureQueriesContext(connection) as queries:
        results = mailboxes_send(
            [(b.credential_id, [b.batch_id]) for b in batches], clock=lambda: NOW
        )

    assert [r.sent for r in results] == [1, 1, 1]
    statements = [q["sql"] for q in queries.captured_queries]
    # The claims, the steps, and the threads' earlier messages (step 2 replies in them).
    assert len([sql for sql in statements if sql.lstrip().startswith("SELECT")]) == 3
    assert len(statements) == 3 + 3 * PER_MESSAGE + 1  # and one completion, for the three
    campaign.refresh_from_db()
    assert campaign.status == "completed"


@pytest.mark.django_db(transaction=True)
def test_a_task_sends_its_mailboxes_at_once_and_a_held_server_keeps_only_its_own(
    smtp_sink, settings
):
    """The mailboxes of one task are sent at once, each over its own connection: a
    server that holds the end of a message's DATA holds only its own mailbox, and the
    others' messages are sent and recorded meanwhile."""
    import threading

    held, quick = smtp_sink(), smtp_sink()
    campaign = CampaignFactory(with_steps=1, status=Campaign.Status.ACTIVE)
    slow = _point_at(campaign.credentials.get(), held, smtp_username="", smtp_password="")
    fast = _more_mailboxes(campaign, quick, 2)
    for _ in range(3):
        _enroll(campaign)
    batches = schedule_due(now=NOW)
    by_credential = {b.credential_id: b for b in batches}
    # The held mailbox first: one after the other, the others would wait for it.
    order = [slow.pk, *(c.pk for c in fast)]
    [held_rcpt] = [c.enrollment.contact.email for c in SendClaim.objects.filter(credential=slow)]
    held.hold_data(held_rcpt)
    results: list = []
    task = threading.Thread(
        target=lambda: results.extend(
            mailboxes_send([(pk, [by_credential[pk].batch_id]) for pk in order], clock=lambda: NOW)
        )
    )
    task.start()
    try:
        quick.wait_for(2)
        held.wait_for(1)  # the held message came in whole; its reply is held
        for _ in range(200):
            if Message.objects.filter(credential__in=fast).count() == 2:
                break
            threading.Event().wait(0.05)
        assert Message.objects.filter(credential__in=fast).count() == 2
        assert not Message.objects.filter(credential=slow).exists()
    finally:
        held.release()
        task.join(timeout=60)
    # Released, the held server answered 421: that mailbox's message is retried later.
    assert [(r.sent, r.retried) for r in results] == [(0, 1), (1, 0), (1, 0)]
    assert not Message.objects.filter(credential=slow).exists()


def test_one_batch_sends_for_several_campaigns_of_a_mailbox(sink):
    first = _campaign(sink)
    credential = first.credentials.get()
    second = CampaignFactory(
        account=first.account, status=Campaign.Status.ACTIVE, with_credential=False
    )
    second.credentials.add(credential)
    CampaignStep.objects.filter(campaign=second).update(subject="Other {{first_name}}")
    a = _enroll(first, first_name="Ada")
    b = _enroll(second, first_name="Bob")

    [result] = _run()

    assert result.sent == 2
    subjects = sorted(r.message["Subject"] for r in sink.messages)
    assert subjects == ["Hello Ada 1", "Other Bob"]
    sent = {e["enrollment_id"]: e["campaign_id"] for e in _events("enrollment.sent")}
    assert sent == {str(a.pk): str(first.pk), str(b.pk): str(second.pk)}
    for campaign in (first, second):
        campaign.refresh_from_db()
        assert campaign.status == "completed"


def test_it_logs_in_with_the_decrypted_password(smtp_sink):
    sink = smtp_sink(username="mailbox@example.com", password="s3cret pass")
    campaign = _campaign(sink)
    _point_at(
        campaign.credentials.get(),
        sink,
        smtp_username="mailbox@example.com",
        smtp_password="s3cret pass",
    )
    _enroll(campaign)
    [result] = _run()
    assert result.sent == 1
    assert len(sink.messages) == 1


def test_a_send_loads_only_the_secret_it_logs_in_with(smtp_sink):
    """Its password (an OAuth mailbox: its access token, test_oauth_sending.py): the
    mailbox's other secrets are neither read nor decrypted for a send, and nothing
    fetches them afterwards."""
    from django.test.utils import CaptureQueriesContext

    sink = smtp_sink(username="mailbox@example.com", password="s3cret pass")
    campaign = _campaign(sink)
    _point_at(
        campaign.credentials.get(),
        sink,
        smtp_username="mailbox@example.com",
        smtp_password="s3cret pass",
        imap_password="imap pass",
        relay_signing_key="relay key",
        oauth_refresh_token="refresh token",
    )
    _enroll(campaign)
    [claimed] = schedule_due(now=NOW)

    with CaptureQueriesContext(connection) as queries:
        result = batch_send(
            batch_id=claimed.batch_id, credential_id=claimed.credential_id, clock=lambda: NOW
        )

    assert result.sent == 1
    assert len(sink.messages) == 1
    statements = " ".join(q["sql"] for q in queries.captured_queries)
    assert '"smtp_password"' in statements
    for unread in ("imap_password", "relay_signing_key", "oauth_refresh_token"):
        assert unread not in statements


@pytest.mark.parametrize("security", ["starttls", "ssl"])
def test_it_speaks_tls_per_security_mode(smtp_sink, settings, security):
    sink = smtp_sink(tls=security, username="u", password="p")
    settings.SENDING_SMTP_CA_FILE = str(sink.ca_file)
    campaign = _campaign(sink)
    _point_at(
        campaign.credentials.get(),
        sink,
        security=security,
        smtp_username="u",
        smtp_password="p",
    )
    _enroll(campaign)
    [result] = _run()
    assert result.sent == 1
    assert len(sink.messages) == 1


def test_it_refuses_a_certificate_it_does_not_trust(smtp_sink):
    sink = smtp_sink(tls="ssl")
    campaign = _campaign(sink)
    credential = _point_at(campaign.credentials.get(), sink, security="ssl")
    enrollment = _enroll(campaign)
    [result] = _run()
    assert result.sent == 0
    assert "TLS" in result.mailbox_error or "certificate" in result.mailbox_error.lower()
    credential.refresh_from_db()
    assert credential.last_error
    enrollment.refresh_from_db()
    assert enrollment.send_attempts == 0
    assert sink.messages == []


def test_it_sends_to_an_internationalised_domain_in_idna_form(sink):
    campaign = _campaign(sink)
    _enroll(campaign, email="kim@bücher.example", first_name="Kim")
    [result] = _run()
    assert result.sent == 1
    [received] = sink.messages
    assert received.rcpt_tos == ["kim@xn--bcher-kva.example"]
    assert received.message["To"] == "Kim <kim@xn--bcher-kva.example>"


def test_a_non_ascii_local_part_needs_smtputf8(smtp_sink):
    plain = smtp_sink()
    campaign = _campaign(plain)
    enrollment = _enroll(campaign, email="jörg@example.org")
    [result] = _run()
    assert (result.sent, result.failed) == (0, 1)
    enrollment.refresh_from_db()
    assert enrollment.status == "failed"
    assert "SMTPUTF8" in enrollment.last_error
    assert plain.messages == []

    capable = smtp_sink(smtputf8=True)
    other = _campaign(capable)
    _enroll(other, email="jörg@example.org")
    [result] = _run()
    assert result.sent == 1
    assert capable.messages[0].rcpt_tos == ["jörg@example.org"]


# --- what an accepted message records -------------------------------------------------------


def test_it_records_an_accepted_step(sink):
    campaign = _campaign(sink, steps=2)
    credential = campaign.credentials.get()
    enrollment = _enroll(campaign, email="lin@example.org")

    _run()

    enrollment.refresh_from_db()
    assert enrollment.status == "sent"
    assert enrollment.current_step == 1
    assert enrollment.sent_at == NOW
    assert enrollment.credential_id == credential.pk
    assert enrollment.next_send_at == NOW + timedelta(days=1)  # step 2: 1,440 minutes
    message = Message.objects.get(enrollment=enrollment)
    assert (message.step, message.to_email, message.credential_id) == (
        1,
        "lin@example.org",
        credential.pk,
    )
    credential.refresh_from_db()
    assert (credential.sent_count, credential.daily_sent_count) == (1, 1)
    assert credential.daily_sent_on == NOW.date()
    assert usage_record_current(account=campaign.account, at=NOW).sends_count == 1
    # The claim is kept as the record of its attempt.
    [attempt] = SendClaim.objects.all()
    assert (attempt.enrollment_id, attempt.step, attempt.credential_id) == (
        enrollment.pk,
        1,
        credential.pk,
    )
    assert (attempt.outcome, attempt.reply_code, attempt.outcome_unknown) == ("sent", 250, False)
    assert attempt.reply_text.startswith("250 ")
    assert (attempt.finished_at, attempt.text) == (NOW, "")
    assert attempt.duration_ms is not None
    assert _events("enrollment.sent") == [
        {
            "enrollment_id": str(enrollment.pk),
            "contact_id": str(enrollment.contact_id),
            "contact_email": "lin@example.org",
            "campaign_id": str(campaign.pk),
            "status": "sent",
            "sent_at": "2026-03-02T10:00:00.000000Z",
            "replied_at": None,
            "bounce_reason": None,
        }
    ]


def test_it_completes_the_enrollment_and_the_campaign_after_the_last_step(sink):
    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    enrollment = _enroll(campaign)
    _run()
    _run()
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    assert enrollment.completed_at == NOW
    assert enrollment.next_send_at is None
    assert [e["status"] for e in _events("enrollment.sent")] == ["sent", "completed"]
    campaign.refresh_from_db()
    assert campaign.status == "completed"


def test_it_keeps_the_campaign_active_while_enrollments_remain(sink):
    campaign = _campaign(sink)
    _enroll(campaign)
    EnrollmentFactory(campaign=campaign)  # pending: not dispatched yet
    _run()
    campaign.refresh_from_db()
    assert campaign.status == "active"


def test_sends_already_scheduled_fire_past_the_plan_limit(sink, api_client, account):
    campaign = _campaign(sink, account=account, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    now = timezone.now()  # the usage period is the real one: dispatch checks it
    enrollment = _enroll(campaign, at=now)
    record = usage_record_current(account=account)
    usage_set(record, account.plan.monthly_limit - 1)
    _run(now)
    _run(now)  # step 2 goes out with the period already at the limit

    assert len(sink.messages) == 2
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    assert usage_record_current(account=account).sends_count == account.plan.monthly_limit + 1
    newcomer = EnrollmentFactory(campaign=campaign)
    response = api_client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"contact_ids": [str(newcomer.contact_id)]}
    )
    body = assert_error(response, 402, "plan_limit_reached")
    assert body["details"]["current_period_sends"] == account.plan.monthly_limit + 1


# --- failures ---------------------------------------------------------------------------------


def test_a_550_on_rcpt_is_a_bounce(sink):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    sink.reject_rcpt("gone@example.org", "550 5.1.1 <gone@example.org>: no such user")
    enrollment = _enroll(campaign, email="gone@example.org")
    ok = _enroll(campaign, email="fine@example.org")

    [result] = _run()

    assert (result.sent, result.bounced) == (1, 1)
    enrollment.refresh_from_db()
    assert enrollment.status == "bounced"
    assert enrollment.bounce_reason == "550 5.1.1 <gone@example.org>: no such user"
    assert Contact.objects.get(pk=enrollment.contact_id).bounced_at == NOW
    assert not Message.objects.filter(enrollment=enrollment).exists()
    credential.refresh_from_db()
    assert (credential.sent_count, credential.bounced_count) == (1, 1)
    stats = CredentialCampaignStats.objects.get(credential=credential)
    assert (stats.sends, stats.bounces) == (2, 1)
    [bounced] = _events("enrollment.bounced")
    assert bounced["status"] == "bounced"
    assert bounced["bounce_reason"].startswith("550 5.1.1")
    assert [m.rcpt_tos for m in sink.messages] == [["fine@example.org"]]
    ok.refresh_from_db()
    assert ok.status == "completed"


def test_a_5xx_on_data_is_a_bounce(sink):
    campaign = _campaign(sink)
    sink.reject_data("554 5.7.1 Message refused")
    enrollment = _enroll(campaign)
    [result] = _run()
    assert result.bounced == 1
    enrollment.refresh_from_db()
    assert enrollment.bounce_reason == "554 5.7.1 Message refused"


def test_a_4xx_retries_later_then_bounces_soft(sink, settings):
    settings.SENDING_RETRY_SCHEDULE = [60, 600]
    settings.SENDING_MAX_ATTEMPTS = 3
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    sink.reject_rcpt("busy@example.org", "451 4.3.2 Try again later")
    enrollment = _enroll(campaign, email="busy@example.org")

    [result] = _run()
    assert result.retried == 1
    enrollment.refresh_from_db()
    assert enrollment.status == "scheduled"
    assert enrollment.send_attempts == 1
    assert enrollment.last_error == "451 4.3.2 Try again later"
    assert enrollment.next_send_at == NOW + timedelta(seconds=60)
    credential.refresh_from_db()
    assert credential.daily_sent_count == 0  # the reservation was given back
    assert _run(NOW + timedelta(seconds=30)) == []  # not due yet

    _run(NOW + timedelta(seconds=60))
    enrollment.refresh_from_db()
    assert enrollment.send_attempts == 2
    assert enrollment.next_send_at == NOW + timedelta(seconds=660)

    _run(NOW + timedelta(seconds=660))
    enrollment.refresh_from_db()
    # The series ended (SENDING_MAX_ATTEMPTS): a soft bounce, `expired` (RFC 3463's
    # 4.4.7), with its event.
    assert enrollment.status == "bounced"
    assert enrollment.next_send_at is None
    assert enrollment.send_attempts == 3
    assert enrollment.bounce_reason == (
        "4.4.7 Delivery expired after 3 attempts; last reply: 451 4.3.2 Try again later"
    )
    [bounced] = _events("enrollment.bounced")
    assert bounced["enrollment_id"] == str(enrollment.pk)
    assert sink.messages == []


def test_a_temporary_failure_then_success_resets_the_attempts(sink, settings):
    settings.SENDING_RETRY_SCHEDULE = [60]
    campaign = _campaign(sink)
    sink.reject_rcpt("busy@example.org", "452 4.2.2 Mailbox full", times=1)
    enrollment = _enroll(campaign, email="busy@example.org")
    _run()
    _run(NOW + timedelta(seconds=60))
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts, enrollment.last_error) == (
        "completed",
        0,
        "",
    )


def test_an_authentication_failure_is_recorded_on_the_credential(smtp_sink, settings):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 900
    sink = smtp_sink(username="mailbox", password="right")
    campaign = _campaign(sink)
    credential = _point_at(
        campaign.credentials.get(), sink, smtp_username="mailbox", smtp_password="wrong"
    )
    enrollments = [_enroll(campaign) for _ in range(2)]

    [result] = _run()

    assert result.sent == 0
    assert result.mailbox_error.startswith("authentication failed: 535")
    credential.refresh_from_db()
    assert credential.last_error.startswith("authentication failed: 535")
    assert credential.last_error_at == NOW
    assert credential.bounced_count == 0
    assert credential.daily_sent_count == 0
    assert credential.disabled_at is None
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.status == "scheduled"
        assert enrollment.send_attempts == 0
        assert enrollment.next_send_at == NOW + timedelta(seconds=900)
    assert _events("enrollment.bounced") == []
    client = client_for(api_key_create(account=campaign.account, label="t").plaintext)
    shown = client.get(f"/smtp_credentials/{credential.pk}").json()
    assert shown["last_error"].startswith("authentication failed: 535")
    assert shown["last_error_at"] == "2026-03-02T10:00:00.000000Z"
    assert shown["bounced_count"] == 0

    # The password is fixed: the next run sends and the error is history.
    credential.smtp_password = "right"
    credential.save()
    _run(NOW + timedelta(seconds=900))
    assert len(sink.messages) == 2
    credential.refresh_from_db()
    assert (credential.last_error, credential.last_error_at) == ("", None)


def test_a_mailbox_stored_without_a_login_sends_nothing_while_one_is_required(sink, settings):
    """SMTP_REQUIRE_LOGIN: a mailbox stored before the rule (or while it was off) waits like
    any mailbox failure until it is given a login; without the rule it sends."""
    settings.SMTP_REQUIRE_LOGIN = True
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 900
    campaign = _campaign(sink)  # no username, no password
    credential = campaign.credentials.get()
    enrollment = _enroll(campaign)

    [result] = _run()

    assert result.sent == 0 and sink.messages == []
    assert result.mailbox_error.startswith("login required")
    credential.refresh_from_db()
    assert "SMTP_REQUIRE_LOGIN" in credential.last_error
    assert (credential.bounced_count, credential.daily_sent_count) == (0, 0)
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 0)
    assert enrollment.next_send_at == NOW + timedelta(seconds=900)
    verification = credential_verify(credential=credential)
    assert verification["smtp"]["error"].startswith("login required")

    settings.SMTP_REQUIRE_LOGIN = False
    _run(NOW + timedelta(seconds=900))
    assert len(sink.messages) == 1


def test_an_unreachable_server_is_a_temporary_failure(settings):
    from tests.support.ports import free_port

    settings.SENDING_RETRY_SCHEDULE = [120]
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_host="127.0.0.1", smtp_port=free_port(), smtp_security="none"
    )
    enrollment = _enroll(campaign)
    [result] = _run()
    assert result.retried == 1
    enrollment.refresh_from_db()
    assert enrollment.send_attempts == 1
    assert enrollment.last_error.startswith("cannot connect to 127.0.0.1")
    assert enrollment.next_send_at == NOW + timedelta(seconds=120)
    credential.refresh_from_db()
    assert credential.last_error.startswith("cannot connect")


def test_550s_past_the_threshold_disable_the_credential_and_pause_the_campaign(sink):
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    good = [_enroll(campaign, email=f"ok{i}@example.org") for i in range(20)]
    EnrollmentFactory(campaign=campaign)  # pending: keeps the campaign active
    _run()
    assert len(sink.messages) == len(good)
    for i in range(3):
        sink.reject_rcpt(f"bad{i}@example.org")
        _enroll(campaign, email=f"bad{i}@example.org")

    _run(NOW + timedelta(seconds=1))

    # 1/21 = 4.8% keeps it; 2/22 = 9.1% disables it; the third is given back unsent.
    credential.refresh_from_db()
    assert credential.disabled_reason == "bounce_rate_exceeded"
    assert len(_events("enrollment.bounced")) == 2
    [disabled] = _events("credential.disabled")
    assert disabled["bounce_rate"] == pytest.approx(9.09)
    assert disabled["threshold"] == 5.0
    assert len(_events("campaign.paused")) == 1
    campaign.refresh_from_db()
    assert (campaign.status, campaign.paused_reason) == ("paused", "all_credentials_disabled")
    assert Enrollment.objects.filter(campaign=campaign, status="scheduled").count() == 1
    assert len(sink.messages) == 20
    assert not SendClaim.objects.open().exists()
    bounced = SendClaim.objects.filter(outcome="bounced")
    assert {(a.reply_code, a.reply_text) for a in bounced} == {(550, "550 5.1.1 No such user here")}
    assert bounced.count() == 2
    _enroll(campaign, at=NOW + timedelta(seconds=2))
    assert _run(NOW + timedelta(seconds=2)) == []  # paused: nothing is claimed


# --- the scheduler ----------------------------------------------------------------------------


def test_it_defers_sends_outside_the_window_to_the_next_opening(sink):
    campaign = _campaign(
        sink,
        timezone="America/New_York",
        send_window={"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]},
    )
    # Monday 10:00 UTC is 05:00 in New York (EST): closed until 09:00 EST = 14:00 UTC.
    enrollment = _enroll(campaign)
    assert _run() == []
    enrollment.refresh_from_db()
    assert enrollment.next_send_at == datetime(2026, 3, 2, 14, 0, tzinfo=UTC)
    assert sink.messages == []

    _run(datetime(2026, 3, 2, 14, 0, tzinfo=UTC))
    assert len(sink.messages) == 1


@pytest.mark.parametrize(
    ("daily_limit", "maximum"),
    [(2, 2000), (1_000_000, 2)],  # a limit stored above DAILY_LIMIT_MAX counts as the maximum
)
def test_it_defers_past_the_daily_limit_to_the_next_utc_day(sink, settings, daily_limit, maximum):
    settings.DAILY_LIMIT_MAX = maximum
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(daily_limit=daily_limit)
    enrollments = [_enroll(campaign) for _ in range(3)]

    _run()

    assert len(sink.messages) == 2
    waiting = [e for e in enrollments if Enrollment.objects.get(pk=e.pk).status == "scheduled"]
    [waiting] = waiting
    waiting.refresh_from_db()
    assert waiting.next_send_at == datetime(2026, 3, 3, 0, 0, tzinfo=UTC)
    _run(datetime(2026, 3, 2, 23, 59, tzinfo=UTC))
    assert len(sink.messages) == 2
    _run(datetime(2026, 3, 3, 0, 0, tzinfo=UTC))
    assert len(sink.messages) == 3
    credential.refresh_from_db()
    assert (credential.daily_sent_on, credential.daily_sent_count) == (
        datetime(2026, 3, 3).date(),
        1,
    )


def test_a_limit_deferral_also_waits_for_the_window(sink):
    campaign = _campaign(
        sink, send_window={"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]}
    )
    SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(daily_limit=0)
    enrollment = _enroll(campaign)
    _run()
    enrollment.refresh_from_db()
    assert enrollment.next_send_at == datetime(2026, 3, 3, 9, 0, tzinfo=UTC)


def test_it_rotates_across_credentials_and_threads_keep_theirs(sink):
    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    first = campaign.credentials.get()
    second = _point_at(CredentialFactory(account=campaign.account), sink, smtp_username="")
    campaign.credentials.add(second)
    enrollments = [_enroll(campaign) for _ in range(4)]

    _run()
    by_enrollment = {e.pk: Enrollment.objects.get(pk=e.pk).credential_id for e in enrollments}
    assert sorted(list(by_enrollment.values()).count(c) for c in (first.pk, second.pk)) == [2, 2]

    _run()
    for enrollment in enrollments:
        messages = Message.objects.filter(enrollment=enrollment)
        assert {m.credential_id for m in messages} == {by_enrollment[enrollment.pk]}
        assert messages.count() == 2
    senders = {m.mail_from for m in sink.messages}
    assert senders == {first.from_email, second.from_email}


def test_a_thread_whose_mailbox_is_disabled_moves_to_another(sink):
    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    first = campaign.credentials.get()
    enrollment = _enroll(campaign)
    _run()
    second = _point_at(CredentialFactory(account=campaign.account), sink, smtp_username="")
    campaign.credentials.add(second)
    SmtpCredential.objects.filter(pk=first.pk).update(disabled_at=NOW, disabled_reason="manual")
    _run()
    enrollment.refresh_from_db()
    assert enrollment.credential_id == second.pk
    assert sink.messages[-1].mail_from == second.from_email


def test_a_thread_at_its_mailbox_limit_waits_instead_of_switching(sink):
    campaign = _campaign(sink, steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=2).update(delay_minutes=0)
    first = campaign.credentials.get()
    enrollment = _enroll(campaign)
    _run()
    second = _point_at(CredentialFactory(account=campaign.account), sink, smtp_username="")
    campaign.credentials.add(second)
    SmtpCredential.objects.filter(pk=first.pk).update(daily_limit=1)
    _run()
    enrollment.refresh_from_db()
    assert enrollment.current_step == 1
    assert enrollment.next_send_at == datetime(2026, 3, 3, 0, 0, tzinfo=UTC)


def test_it_pauses_a_campaign_left_without_an_enabled_credential(sink):
    campaign = _campaign(sink)
    SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(
        disabled_at=NOW, disabled_reason="manual"
    )
    enrollment = _enroll(campaign)
    assert _run() == []
    campaign.refresh_from_db()
    assert (campaign.status, campaign.paused_reason) == ("paused", "all_credentials_disabled")
    assert len(_events("campaign.paused")) == 1
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.next_send_at) == ("scheduled", NOW)


def test_it_sends_nothing_to_suppressed_contacts_or_for_paused_campaigns(sink):
    campaign = _campaign(sink)
    unsubscribed = _enroll(campaign)
    Contact.objects.filter(pk=unsubscribed.contact_id).update(unsubscribed_at=NOW)
    bounced = _enroll(campaign)
    Contact.objects.filter(pk=bounced.contact_id).update(bounced_at=NOW)
    paused = _campaign(sink)
    Campaign.objects.filter(pk=paused.pk).update(status=Campaign.Status.PAUSED)
    waiting = _enroll(paused)

    assert _run() == []

    assert sink.messages == []
    unsubscribed.refresh_from_db()
    assert (unsubscribed.status, unsubscribed.unsubscribed_at) == ("unsubscribed", NOW)
    bounced.refresh_from_db()
    assert (bounced.status, bounced.bounced_at) == ("bounced", NOW)
    waiting.refresh_from_db()
    assert waiting.status == "scheduled"
    # Those were the campaign's last active enrollments: it is done. The paused one waits.
    campaign.refresh_from_db()
    paused.refresh_from_db()
    assert (campaign.status, paused.status) == ("completed", "paused")


def test_a_campaign_with_active_enrollments_left_is_not_completed_by_suppression(sink):
    campaign = _campaign(sink)
    suppressed = _enroll(campaign)
    Contact.objects.filter(pk=suppressed.contact_id).update(unsubscribed_at=NOW)
    later = _enroll(campaign)
    Enrollment.objects.filter(pk=later.pk).update(next_send_at=NOW + timedelta(days=1))

    assert _run() == []

    campaign.refresh_from_db()
    assert campaign.status == "active"


def test_a_claim_is_taken_once(sink):
    campaign = _campaign(sink)
    _enroll(campaign)
    first = schedule_due(now=NOW)
    assert schedule_due(now=NOW) == []
    [batch] = first
    batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW)
    # The task delivered twice (a redelivery) sends nothing more.
    again = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )
    assert again.sent == 0
    assert len(sink.messages) == 1


def test_a_claim_whose_contact_unsubscribed_meanwhile_is_not_sent(sink):
    campaign = _campaign(sink)
    enrollment = _enroll(campaign)
    [batch] = schedule_due(now=NOW)
    Contact.objects.filter(pk=enrollment.contact_id).update(unsubscribed_at=NOW)
    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW
    )
    assert (result.sent, result.skipped) == (0, 1)
    assert sink.messages == []
    assert SendClaim.objects.count() == 0


def test_lapsed_claims_are_recovered(sink, settings):
    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    never_started = _enroll(campaign)
    interrupted = _enroll(campaign)
    schedule_due(now=NOW)
    # The worker died: one claim untouched, one marked started (outcome unknown), as
    # the sender marks it, with the message it was sending.
    SendClaim.objects.filter(enrollment=interrupted).update(
        sending_at=NOW, message_id="m1@example.com", subject="Hello", to_email="x@example.org"
    )
    legacy = _enroll(campaign)  # started before claims kept their message
    SendClaim.objects.create(
        enrollment=legacy,
        batch_id=uuid.uuid4(),
        credential=credential,
        step=1,
        claimed_at=NOW,
        lease_until=NOW + timedelta(seconds=60),
        sending_at=NOW,
    )
    credential.refresh_from_db()
    assert credential.daily_sent_count == 2

    assert schedule_due(now=NOW + timedelta(seconds=59)) == []
    [batch] = schedule_due(now=NOW + timedelta(seconds=60))

    assert batch.size == 1
    interrupted.refresh_from_db()
    assert interrupted.status == "completed"  # counted as sent: the sequence goes on
    message = Message.objects.get(enrollment=interrupted)
    assert (message.message_id, message.subject, message.reply_seen) == (
        "m1@example.com",
        "Hello",
        False,
    )
    assert [e["enrollment_id"] for e in _events("enrollment.sent")] == [str(interrupted.pk)]
    legacy.refresh_from_db()
    assert (legacy.status, legacy.last_error) == ("failed", INTERRUPTED_ERROR)
    credential.refresh_from_db()
    assert credential.daily_sent_count == 2  # the started one stays counted
    # The started one is the record of its attempt; the never-started claim was no
    # attempt: deleted, and the enrollment claimed again (one open claim, no other row).
    assert SendClaim.objects.get(enrollment=never_started).finished_at is None
    lost = SendClaim.objects.get(enrollment=interrupted)
    assert (lost.outcome, lost.outcome_unknown, lost.reply_text) == (
        "sent",
        True,
        interrupted.last_error,
    )
    # Sent when it started; its attempt ended when the recovery gave it up.
    assert (message.sent_at, lost.sending_at) == (NOW, NOW)
    assert lost.finished_at == NOW + timedelta(seconds=60)
    assert SendClaim.objects.get(enrollment=legacy).reply_text == INTERRUPTED_ERROR
    batch_send(
        batch_id=batch.batch_id,
        credential_id=batch.credential_id,
        clock=lambda: NOW + timedelta(seconds=60),
    )
    assert [m.rcpt_tos for m in sink.messages] == [[never_started.contact.email]]


def test_a_claim_lapsing_after_midnight_gives_back_the_day_it_was_claimed_on(sink, settings):
    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(sink)  # no send window: always open
    credential = campaign.credentials.get()
    late = datetime(2026, 3, 2, 23, 59, 30, tzinfo=UTC)
    _enroll(campaign, at=late)
    assert len(schedule_due(now=late)) == 1
    credential.refresh_from_db()
    assert (credential.daily_sent_on, credential.daily_sent_count) == (late.date(), 1)
    # The worker died. After midnight the mailbox has sent 3 messages of the new day.
    next_day = late.date() + timedelta(days=1)
    SmtpCredential.objects.filter(pk=credential.pk).update(
        daily_sent_on=next_day, daily_sent_count=3
    )

    schedule_due(now=late + timedelta(seconds=61))  # recovers the lapsed claim

    credential.refresh_from_db()
    # The new day's count is untouched: the reservation belonged to the day before.
    assert (credential.daily_sent_on, credential.daily_sent_count) == (next_day, 4)


def test_a_step_removed_meanwhile_completes_the_enrollment(sink):
    campaign = _campaign(sink, steps=2)
    enrollment = _enroll(campaign)
    Enrollment.objects.filter(pk=enrollment.pk).update(current_step=1, status="sent")
    CampaignStep.objects.filter(campaign=campaign, position=2).delete()
    assert _run() == []
    enrollment.refresh_from_db()
    assert enrollment.status == "completed"
    campaign.refresh_from_db()
    assert campaign.status == "completed"


def test_the_scan_uses_skip_locked():
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        schedule_due(now=NOW)
    assert any("FOR UPDATE SKIP LOCKED" in q["sql"] for q in queries.captured_queries)


def test_concurrent_schedulers_claim_each_enrollment_once_within_the_limit(live_db, settings):
    import threading

    from django.db import connections

    settings.SENDING_BATCH_SIZE = 40
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    second = CredentialFactory(account=campaign.account)
    campaign.credentials.add(second)
    SmtpCredential.objects.filter(campaigns=campaign).update(daily_limit=75)
    contacts = Contact.objects.bulk_create(
        [
            Contact(
                account=campaign.account, email=f"p{i}@example.org", email_lower=f"p{i}@example.org"
            )
            for i in range(200)
        ]
    )
    Enrollment.objects.bulk_create(
        [
            Enrollment(campaign=campaign, contact=c, status="scheduled", next_send_at=NOW)
            for c in contacts
        ]
    )
    batches, errors = [], []
    barrier = threading.Barrier(3)

    def run():
        try:
            barrier.wait()
            batches.extend(schedule_due(now=NOW))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert errors == []
    assert sum(b.size for b in batches) == SendClaim.objects.count() == 150  # 2 x 75
    for credential in SmtpCredential.objects.filter(campaigns=campaign):
        assert credential.daily_sent_count == 75
        assert SendClaim.objects.filter(credential=credential).count() == 75
    deferred = Enrollment.objects.filter(next_send_at=datetime(2026, 3, 3, tzinfo=UTC))
    assert deferred.count() == 50


def test_tasks_route_and_beat_runs_the_scheduler(settings):
    from config.celery import app

    def queue(name):
        return app.amqp.router.route({}, name)["queue"].name

    assert queue("outreach.tasks.send_mailboxes") == "sending"
    assert queue("outreach.tasks.send_batch") == "sending"  # queued by an earlier release
    assert queue("outreach.tasks.schedule_sends") == "celery"  # never behind SMTP batches
    entry = settings.CELERY_BEAT_SCHEDULE["outreach-send-schedule"]
    assert entry["task"] == "outreach.tasks.schedule_sends"
    assert entry["schedule"] == settings.SENDING_SCHEDULE_INTERVAL_SECONDS


def test_the_tasks_send_what_the_scheduler_claimed_and_an_earlier_releases_still_runs(sink):
    """The scheduler queues send_mailboxes (its counts summed over the mailboxes); a
    send_batch an earlier release queued before an upgrade still sends its batch."""
    from outreach.sending.tasks import send_batch, send_mailboxes

    campaign = _campaign(sink, steps=2)
    credential = campaign.credentials.get()
    _enroll(campaign), _enroll(campaign)
    [batch] = schedule_due(now=timezone.now())  # the tasks' clock
    result = send_mailboxes.apply(args=([[str(credential.pk), [str(batch.batch_id)]]],)).get()
    assert result == {
        "sent": 2,
        "bounced": 0,
        "retried": 0,
        "failed": 0,
        "skipped": 0,
        "mailboxes": 1,
        "mailbox_errors": 0,
    }
    _enroll(campaign)
    [batch] = schedule_due(now=timezone.now())  # the tasks' clock
    old = send_batch.apply(args=(str(batch.batch_id), str(credential.pk))).get()
    assert old["sent"] == 1
    assert Message.objects.filter(credential=credential).count() == 3


def test_a_message_that_cannot_be_built_fails_alone(sink, monkeypatch):

    campaign = _campaign(sink)
    broken = _enroll(campaign, email="broken@example.org")
    fine = _enroll(campaign, email="fine@example.org")
    real = rendering.contact_values

    def values(contact):  # fault injection: a bug that hits one contact only
        if contact.email == "broken@example.org":
            raise KeyError("boom")
        return real(contact)

    monkeypatch.setattr(message, "contact_values", values)

    [result] = _run()

    assert (result.sent, result.failed) == (1, 1)
    broken.refresh_from_db()
    assert broken.status == "failed"
    assert broken.last_error == "The message could not be built: KeyError: 'boom'"
    fine.refresh_from_db()
    assert fine.status == "completed"
    assert [m.rcpt_tos for m in sink.messages] == [["fine@example.org"]]
    failed = SendClaim.objects.get(enrollment=broken)
    assert (failed.outcome, failed.reply_code, failed.reply_text) == (
        "failed",
        None,
        broken.last_error,
    )
    assert not SendClaim.objects.open().exists()


def test_line_breaks_in_names_cannot_inject_headers(sink):
    campaign = _campaign(sink)
    SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(
        from_name="Sales\r\nBcc: spy@evil.example"
    )
    _enroll(campaign, email="eve@example.org", first_name="Eve\nBcc: spy@evil.example")
    [result] = _run()
    assert result.sent == 1
    msg = sink.messages[0].message
    assert msg["Bcc"] is None
    assert msg["To"] == '"Eve Bcc: spy@evil.example" <eve@example.org>'
    assert sink.messages[0].rcpt_tos == ["eve@example.org"]


def test_a_batch_running_into_its_lease_gives_the_rest_back(sink, settings):
    settings.SENDING_LEASE_SECONDS = 600
    campaign = _campaign(sink)
    credential = campaign.credentials.get()
    enrollments = [_enroll(campaign) for _ in range(2)]
    [batch] = schedule_due(now=NOW)

    late = NOW + timedelta(seconds=545)  # 55 s before the lease ends: inside the margin
    result = batch_send(
        batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: late
    )

    assert (result.sent, result.skipped) == (0, 2)
    assert sink.messages == []
    assert SendClaim.objects.count() == 0
    credential.refresh_from_db()
    assert credential.daily_sent_count == 0
    # Due again at once, in their place: a claim never moved them.
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.next_send_at == NOW
    [again] = schedule_due(now=late)
    assert again.size == 2


# --- an outcome that is unknown ------------------------------------------------------------


def test_a_message_whose_reply_never_comes_counts_as_sent_and_is_never_sent_again(sink, settings):
    settings.SENDING_SMTP_TIMEOUT_SECONDS = 1
    campaign = _campaign(sink, steps=2)
    held = _enroll(campaign, email="held@example.org")
    other = _enroll(campaign, email="other@example.org", at=NOW + timedelta(seconds=1))
    sink.hold_data("held@example.org")  # the whole message arrives; no reply to the dot

    try:
        [result] = _run(NOW + timedelta(seconds=1))
    finally:
        sink.release()

    assert (result.sent, result.retried, result.failed) == (2, 0, 0)
    message = Message.objects.get(enrollment=held)
    assert message.reply_seen is False
    held.refresh_from_db()
    assert (held.status, held.current_step) == ("sent", 1)  # the sequence goes on
    assert "never seen" in held.last_error
    assert sorted(e["contact_email"] for e in _events("enrollment.sent")) == [
        "held@example.org",
        "other@example.org",
    ]
    assert (
        sum(
            UsageRecord.objects.filter(account=campaign.account).values_list(
                "sends_count", flat=True
            )
        )
        == 2
    )
    assert Message.objects.get(enrollment=other).reply_seen is True
    attempt = SendClaim.objects.get(enrollment=held)
    assert (attempt.outcome, attempt.outcome_unknown, attempt.reply_code) == ("sent", True, None)
    assert attempt.reply_text == held.last_error
    # The next message went over a new connection, and nothing is sent again.
    assert not SendClaim.objects.open().exists()
    assert _run(NOW + timedelta(seconds=2)) == []
    assert len(sink.to("held@example.org")) == 1


def test_a_connection_dropped_after_the_final_dot_counts_as_sent_once(sink):
    campaign = _campaign(sink, steps=1)
    cut = _enroll(campaign, email="cut@example.org")
    after = _enroll(campaign, email="after@example.org", at=NOW + timedelta(seconds=1))
    sink.drop_after_data("cut@example.org")

    [result] = _run(NOW + timedelta(seconds=1))

    assert (result.sent, result.retried) == (2, 0)
    assert Message.objects.get(enrollment=cut).reply_seen is False
    assert Message.objects.get(enrollment=after).reply_seen is True  # a new connection
    cut.refresh_from_db()
    assert cut.status == "completed" and "never seen" in cut.last_error
    assert _run(NOW + timedelta(minutes=30)) == []  # nothing due again
    assert len(sink.to("cut@example.org")) == 1 and len(sink.to("after@example.org")) == 1


@pytest.mark.django_db(transaction=True)
def test_one_scheduler_run_at_a_time(smtp_sink):
    import psycopg

    from outreach.sending.scheduler import SCHEDULER_LOCK

    campaign = _campaign(smtp_sink())
    _enroll(campaign)
    params = connection.get_connection_params()
    for key in ("cursor_factory", "context", "pool"):
        params.pop(key, None)
    with psycopg.connect(**params, autocommit=True) as other_run:
        other_run.execute("SELECT pg_advisory_lock(%s)", [SCHEDULER_LOCK])
        assert schedule_due(now=NOW) == []  # another run holds it: nothing claimed
        other_run.execute("SELECT pg_advisory_unlock(%s)", [SCHEDULER_LOCK])
    [batch] = schedule_due(now=NOW)
    assert batch.size == 1


def test_a_run_queues_its_unpaced_mailboxes_in_tasks_of_about_a_batch_of_claims(
    sink, settings, monkeypatch, django_capture_on_commit_callbacks
):
    """A task loads all its claims before its first message: a burst's mailboxes go in
    tasks of about SENDING_BATCH_SIZE claims, each mailbox whole (one connection)."""
    from outreach.sending import scheduler

    settings.SENDING_BATCH_SIZE = 10
    campaign = _campaign(sink)
    _more_mailboxes(campaign, sink, 3)
    for _ in range(16):  # four a mailbox
        _enroll(campaign)
    queued: list = []
    monkeypatch.setattr(scheduler, "batches_enqueue", queued.append)

    with django_capture_on_commit_callbacks(execute=True):
        batches = schedule_due(now=NOW, enqueue=True)

    assert sum(b.size for b in batches) == 16
    claims = [
        sum(b.size for b in batches for _, ids in group if str(b.batch_id) in ids)
        for group in queued
    ]
    assert claims == [8, 8]  # two mailboxes of four claims each, twice
    assert [len({credential for credential, _ in group}) for group in queued] == [2, 2]


def test_a_burst_larger_than_a_run_is_not_piled_onto_the_mailboxes_done_first(sink, settings):
    """A run takes its mailboxes' even share of what is due: the rest of a burst waits
    for the mailboxes still sending their part, instead of going, all of it, to the
    first ones done (one long session each)."""
    settings.SENDING_BATCH_SIZE = 4
    settings.SENDING_MAX_PER_TICK = 8
    campaign = _campaign(sink)
    _more_mailboxes(campaign, sink, 3)
    for _ in range(12):
        _enroll(campaign)

    first = schedule_due(now=NOW)
    per_mailbox: dict = {}
    for batch in first:
        per_mailbox[batch.credential_id] = per_mailbox.get(batch.credential_id, 0) + batch.size
    # 8 of 12 (the run's limit), each mailbox its share of what a run may take: 8 / 4.
    assert sorted(per_mailbox.values()) == [2, 2, 2, 2]
    done = first[0].credential_id
    for batch in [b for b in first if b.credential_id == done]:
        batch_send(batch_id=batch.batch_id, credential_id=done, clock=lambda: NOW)

    later = NOW + timedelta(seconds=1)
    second = schedule_due(now=later)

    # 4 left for 4 mailboxes, a share of 1: the one done takes 1; 3 wait for the three
    # still sending.
    assert [(b.credential_id, b.size) for b in second] == [(done, 1)]
    waiting = Enrollment.objects.not_in_flight().filter(next_send_at__lte=later, status="scheduled")
    assert waiting.count() == 3
