"""POST /replies/:id/respond and the send of a response, against a real SMTP server
(aiosmtpd, tests/support/smtp.py): the message on the wire, every outcome and what it
records, the retries and the recovery, the refusals, isolation and query counts."""

from datetime import UTC, datetime, timedelta
from email.utils import formataddr

import pytest

from billing.usage import usage_record_current
from outreach.blocklist.services import blocklist_add
from outreach.contacts.suppression import suppression_record
from outreach.conversations.respond import (
    REFERENCES_MAX,
    response_create,
    responses_recover,
    thread_references,
)
from outreach.conversations.response_sending import (
    BLOCKED_ERROR,
    SUPPRESSED_ERROR,
    response_send,
)
from outreach.models.contacts import Contact
from outreach.models.conversations import ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending.smtp import UNSEEN_REPLY_NOTE
from tests.conversations.factories import ReplyFactory, SentMessageFactory
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error, assert_fields
from tests.support.oauth_provider import credential_connect
from tests.support.ports import free_port
from tests.support.usage import usage_set

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
ADA = "ada@example.org"


@pytest.fixture
def sink(smtp_sink):
    return smtp_sink()


def _reply(account, sink, *, email=ADA, **reply):
    """A reply of `email` to step 1, received in a mailbox pointed at the sink."""
    campaign = CampaignFactory(account=account, status="active")
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="",
        smtp_password="",
        from_name="Sam Sender",
        from_email="sam@sender.example.com",
    )
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=account, email=email),
        status=Enrollment.Status.REPLIED,
    )
    message = SentMessageFactory(enrollment=enrollment, message_id="step1@sender.example.com")
    return ReplyFactory(message=message, **reply)


def _respond(client, reply, body=None, **headers):
    body = {"body_text": "Happy to. Tuesday at 10?"} if body is None else body
    return client.post(f"/replies/{reply.pk}/respond", body, format="json", **headers)


def _usage(account) -> int:
    return usage_record_current(account=account).sends_count


# --- the answer on the wire -----------------------------------------------------------------


def test_it_answers_in_the_thread_from_the_mailbox_that_got_the_reply(
    api_client, account, sink, django_capture_on_commit_callbacks
):
    reply = _reply(account, sink, message_id="reply1@mail.example.org")
    body = {"body_text": "Happy to. Tuesday at 10?", "body_html": "<p>Happy to.</p>"}

    with django_capture_on_commit_callbacks(execute=True):
        answer = _respond(api_client, reply, body)

    assert answer.status_code == 201, answer.content
    data = answer.json()
    response = ReplyResponse.objects.get()
    assert data == {
        "id": str(response.pk),
        "reply_id": str(reply.pk),
        "enrollment_id": str(reply.enrollment_id),
        "status": "queued",
        "subject": "Re: Hello Ada 1",
        "to": ADA,
        "sent_at": None,
        "error": None,
        "created_at": data["created_at"],
    }
    [received] = sink.messages
    assert received.mail_from == "sam@sender.example.com"
    assert received.rcpt_tos == [ADA]
    message = received.message
    assert message["From"] == formataddr(("Sam Sender", "sam@sender.example.com"))
    assert message["To"] == formataddr(("Ada Lovelace", ADA))
    assert message["Subject"] == "Re: Hello Ada 1"
    assert message["In-Reply-To"] == "<reply1@mail.example.org>"
    assert message["References"] == "<step1@sender.example.com> <reply1@mail.example.org>"
    assert message["Message-ID"] == f"<{response.message_id}>"
    assert response.message_id.endswith("@sender.example.com")
    assert message.get_body(("plain",)).get_content() == "Happy to. Tuesday at 10?\r\n"
    assert message.get_body(("html",)).get_content() == "<p>Happy to.</p>\r\n"
    # A person's answer: no unsubscribe header, footer or open pixel.
    assert message["List-Unsubscribe"] is None
    assert "/t/o/" not in received.data.decode()

    response.refresh_from_db()
    assert (response.status, response.reply_seen, response.error) == ("sent", True, "")
    assert response.sent_at is not None and response.attempts == 0
    assert _usage(account) == 1
    credential = SmtpCredential.objects.get(pk=reply.credential_id)
    assert (credential.sent_count, credential.daily_sent_count) == (1, 1)
    # The enrollment is not moved by a response.
    assert Enrollment.objects.get(pk=reply.enrollment_id).status == "replied"


def test_a_text_only_answer_is_one_plain_part(account, sink):
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Yes.")
    assert response_send(response_id=response.pk) == "sent"
    message = sink.messages[0].message
    assert message.get_content_type() == "text/plain"
    assert message.get_content() == "Yes.\r\n"


def test_the_subject_does_not_stack_re_and_the_chain_is_kept_in_order(account, sink):
    reply = _reply(
        account,
        sink,
        subject="RE: Re:Hello Ada 1",
        message_id="r3@mail.example.org",
        references=["a@x.example", "b@x.example", "a@x.example", "r3@mail.example.org"],
    )
    response = response_create(account=account, reply=reply, body_text="Sure.")
    assert response.subject == "Re: Hello Ada 1"
    assert response.references == ["a@x.example", "b@x.example", "r3@mail.example.org"]
    assert response.in_reply_to == "r3@mail.example.org"


def test_malformed_ids_are_left_out_and_a_long_chain_keeps_its_ends(account, sink):
    reply = _reply(account, sink)
    reply.references = ["ok@x.example", "bad id@x", "evil@x\r\nBcc: x@y", 7]
    reply.message_id = "last@x.example"
    assert thread_references(reply) == ["ok@x.example", "last@x.example"]
    reply.references = [f"m{i}@x.example" for i in range(30)]
    chain = thread_references(reply)
    assert len(chain) == REFERENCES_MAX
    assert chain[0] == "m0@x.example" and chain[-2:] == ["m29@x.example", "last@x.example"]


def test_a_subject_with_a_line_break_stays_one_header(account, sink):
    reply = _reply(account, sink, subject="Hello\r\nBcc: victim@example.net")
    response = response_create(account=account, reply=reply, body_text="Hi.")
    assert response_send(response_id=response.pk) == "sent"
    message = sink.messages[0].message
    assert message["Subject"] == "Re: Hello Bcc: victim@example.net"
    assert message["Bcc"] is None and sink.messages[0].rcpt_tos == [ADA]


def test_a_non_ascii_address_goes_with_smtputf8(account, smtp_sink):
    sink = smtp_sink(smtputf8=True)
    reply = _reply(account, sink, email="zoë@bücher.example")
    response = response_create(account=account, reply=reply, body_text="Danke!")
    assert response_send(response_id=response.pk) == "sent"
    assert sink.messages[0].rcpt_tos == ["zoë@bücher.example"]


def test_a_non_ascii_address_fails_on_a_server_without_smtputf8(account, sink):
    reply = _reply(account, sink, email="zoë@bücher.example")
    response = response_create(account=account, reply=reply, body_text="Danke!")
    assert response_send(response_id=response.pk) == "failed"
    response.refresh_from_db()
    assert "SMTPUTF8" in response.error and sink.messages == []


# --- never twice ----------------------------------------------------------------------------


def test_an_idempotency_key_replay_answers_the_same_response_and_sends_once(
    api_client, account, sink, django_capture_on_commit_callbacks
):
    reply = _reply(account, sink)
    with django_capture_on_commit_callbacks(execute=True):
        first = _respond(api_client, reply, HTTP_IDEMPOTENCY_KEY="answer-1")
    with django_capture_on_commit_callbacks(execute=True):
        again = _respond(api_client, reply, HTTP_IDEMPOTENCY_KEY="answer-1")

    assert first.status_code == again.status_code == 201
    assert again["Idempotent-Replay"] == "true"
    assert again.content == first.content
    assert ReplyResponse.objects.count() == 1
    assert len(sink.messages) == 1
    assert _usage(account) == 1
    # The same key with another body is a conflict, and sends nothing.
    other = _respond(api_client, reply, {"body_text": "Other"}, HTTP_IDEMPOTENCY_KEY="answer-1")
    assert_error(other, 409, "idempotency_conflict")
    assert len(sink.messages) == 1


def test_the_task_run_twice_sends_once(account, sink):
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Once.")
    assert response_send(response_id=response.pk) == "sent"
    assert response_send(response_id=response.pk) == "skipped"
    assert len(sink.messages) == 1 and _usage(account) == 1


@pytest.mark.parametrize("peer", ["hangs", "drops"])
def test_a_server_that_never_answers_the_final_dot_counts_it_sent_once(
    account, sink, settings, peer
):
    settings.SENDING_SMTP_TIMEOUT_SECONDS = 1
    reply = _reply(account, sink)
    if peer == "hangs":
        sink.hold_data(ADA)
    else:
        sink.drop_after_data(ADA)
    response = response_create(account=account, reply=reply, body_text="Maybe twice?")

    assert response_send(response_id=response.pk) == "unseen"

    response.refresh_from_db()
    assert (response.status, response.reply_seen, response.error) == (
        "sent",
        False,
        UNSEEN_REPLY_NOTE,
    )
    assert _usage(account) == 1
    # Never sent again: not by the task, not by the recovery.
    assert response_send(response_id=response.pk) == "skipped"
    assert responses_recover(now=NOW + timedelta(days=1)) == (0, 0)
    sink.release()
    assert len(sink.to(ADA)) == 1


# --- failures -------------------------------------------------------------------------------


def test_a_4xx_is_retried_on_the_schedule_then_sent(
    account, sink, settings, django_capture_on_commit_callbacks
):
    settings.SENDING_RETRY_SCHEDULE = [300, 900]
    reply = _reply(account, sink)
    sink.reject_rcpt(ADA, "451 4.7.1 Try again later", times=1)
    response = response_create(account=account, reply=reply, body_text="Later.", now=NOW)

    assert response_send(response_id=response.pk, now=NOW) == "retry"
    response.refresh_from_db()
    assert (response.status, response.attempts, response.sending_at) == ("queued", 1, None)
    assert response.error == "451 4.7.1 Try again later"
    assert response.next_attempt_at == NOW + timedelta(seconds=300)
    # Not due yet: the recovery leaves it alone.
    with django_capture_on_commit_callbacks(execute=True):
        assert responses_recover(now=NOW + timedelta(seconds=299)) == (0, 0)
    assert sink.messages == []
    with django_capture_on_commit_callbacks(execute=True):
        assert responses_recover(now=NOW + timedelta(seconds=300)) == (0, 1)

    response.refresh_from_db()
    assert (response.status, response.error) == ("sent", "")
    assert len(sink.to(ADA)) == 1 and _usage(account) == 1


def test_temporary_failures_end_failed_after_the_last_attempt(account, sink, settings):
    settings.SENDING_MAX_ATTEMPTS = 2
    reply = _reply(account, sink)
    sink.reject_rcpt(ADA, "452 4.2.2 Mailbox full")
    response = response_create(account=account, reply=reply, body_text="Try.", now=NOW)

    assert response_send(response_id=response.pk, now=NOW) == "retry"
    assert response_send(response_id=response.pk, now=NOW + timedelta(hours=1)) == "failed"

    response.refresh_from_db()
    assert (response.status, response.attempts) == ("failed", 2)
    assert response.error == "452 4.2.2 Mailbox full"
    assert _usage(account) == 0


def test_a_server_that_cannot_be_reached_is_a_temporary_failure(account, sink):
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).update(smtp_port=free_port())
    response = response_create(account=account, reply=reply, body_text="Hello?")
    assert response_send(response_id=response.pk) == "retry"
    response.refresh_from_db()
    assert response.status == "queued" and "cannot connect" in response.error


def test_a_5xx_fails_the_response_without_bouncing_the_enrollment(account, sink):
    reply = _reply(account, sink)
    sink.reject_rcpt(ADA, "550 5.1.1 No such user here")
    response = response_create(account=account, reply=reply, body_text="Gone?")

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert (response.status, response.error) == ("failed", "550 5.1.1 No such user here")
    assert response.sent_at is None and _usage(account) == 0
    enrollment = Enrollment.objects.select_related("contact").get(pk=reply.enrollment_id)
    assert enrollment.status == "replied" and enrollment.contact.bounced_at is None


def test_a_mailbox_that_refuses_the_login_fails_the_response(account, smtp_sink):
    sink = smtp_sink(username="sam", password="right")
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).update(
        smtp_username="sam", smtp_password="wrong"
    )
    response = response_create(account=account, reply=reply, body_text="Hi.")

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert response.status == "failed" and response.error.startswith("authentication failed")
    assert sink.messages == []
    # The person may respond again once the mailbox is fixed.


def test_a_contact_suppressed_after_the_response_was_written_gets_nothing(account, sink):
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Hi.")
    Contact.objects.filter(pk=reply.contact_id).update(unsubscribed_at=NOW)

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert (response.status, response.error) == ("failed", SUPPRESSED_ERROR)
    assert sink.messages == []


def test_a_mailbox_disabled_after_the_response_was_written_fails_it(account, sink):
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Hi.")
    SmtpCredential.objects.filter(pk=reply.credential_id).update(disabled_at=NOW)

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert response.error == "The mailbox cannot send (disabled)."
    assert sink.messages == []


# --- recovery -------------------------------------------------------------------------------


def test_a_response_whose_worker_was_lost_after_its_mark_is_recorded_sent_once(
    account, sink, settings
):
    settings.SENDING_LEASE_SECONDS = 60
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Lost?", now=NOW)
    # The worker marked it, then died (during the SMTP transaction, or before the record).
    ReplyResponse.objects.filter(pk=response.pk).update(sending_at=NOW)

    assert responses_recover(now=NOW + timedelta(seconds=59)) == (0, 0)
    assert responses_recover(now=NOW + timedelta(seconds=60)) == (1, 0)

    response.refresh_from_db()
    assert (response.status, response.reply_seen, response.sent_at) == ("sent", False, NOW)
    assert response.error == UNSEEN_REPLY_NOTE
    assert usage_record_current(account=account, at=NOW).sends_count == 1
    assert SmtpCredential.objects.get(pk=reply.credential_id).sent_count == 1
    # Never sent (again): the task finds it sent; the recovery finds nothing more.
    assert response_send(response_id=response.pk) == "skipped"
    assert responses_recover(now=NOW + timedelta(hours=1)) == (0, 0)
    assert sink.messages == []


def test_a_queued_response_whose_task_was_lost_is_queued_again(
    account, sink, settings, django_capture_on_commit_callbacks
):
    settings.SENDING_LEASE_SECONDS = 60
    reply = _reply(account, sink)
    # Created, committed, and its task never ran (the callbacks are not executed).
    response = response_create(account=account, reply=reply, body_text="Anyone?", now=NOW)

    with django_capture_on_commit_callbacks(execute=True):
        assert responses_recover(now=NOW + timedelta(seconds=59)) == (0, 0)
    assert sink.messages == []
    with django_capture_on_commit_callbacks(execute=True):
        assert responses_recover(now=NOW + timedelta(seconds=60)) == (0, 1)

    response.refresh_from_db()
    assert response.status == "sent"
    assert len(sink.to(ADA)) == 1
    # Queued again once only: a second run finds nothing due.
    assert responses_recover(now=NOW + timedelta(seconds=61)) == (0, 0)


# --- OAuth mailboxes ------------------------------------------------------------------------


def test_an_oauth_mailbox_answers_over_xoauth2(account, smtp_sink, oauth_provider):
    provider = oauth_provider()
    sink = smtp_sink(xoauth2=provider.access_token_valid)
    reply = _reply(account, sink)
    credential = SmtpCredential.objects.get(pk=reply.credential_id)
    credential_connect(credential, provider, "owner@gmail.example", expires_in=timedelta(hours=1))
    reply.refresh_from_db()
    response = response_create(account=account, reply=reply, body_text="From Gmail.")

    assert response_send(response_id=response.pk) == "sent"

    assert sink.xoauth2_logins == [("owner@gmail.example", True)]
    [received] = sink.messages
    assert received.mail_from == "owner@gmail.example"
    assert received.message["From"] == formataddr(("Sam Sender", "owner@gmail.example"))
    assert received.message["Message-ID"].endswith("@gmail.example>")


def test_an_oauth_mailbox_whose_grant_was_revoked_fails_the_response(
    account, smtp_sink, oauth_provider
):
    provider = oauth_provider()
    sink = smtp_sink(xoauth2=provider.access_token_valid)
    reply = _reply(account, sink)
    credential = SmtpCredential.objects.get(pk=reply.credential_id)
    # The stored access token expired: a refresh is needed, and the provider refuses it.
    credential_connect(credential, provider, "owner@gmail.example", expires_in=timedelta(0))
    provider.revoke("owner@gmail.example")
    reply.refresh_from_db()
    response = response_create(account=account, reply=reply, body_text="Hi.")

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert response.status == "failed" and response.error
    assert sink.messages == []
    credential.refresh_from_db()
    assert credential.oauth_status == "reauthorization_required"


# --- refusals -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"disabled_at": NOW}, "disabled"),
        (
            {"auth_method": "oauth_google", "oauth_status": "reauthorization_required"},
            "reauthorization_required",
        ),
    ],
)
def test_a_mailbox_that_cannot_send_is_409(api_client, account, sink, change, reason):
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).update(**change)
    body = assert_error(_respond(api_client, reply), 409, "credential_unavailable")
    assert body["details"] == {"reason": reason}
    assert not ReplyResponse.objects.exists() and sink.messages == []


def test_a_deleted_mailbox_is_409(api_client, account, sink):
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).delete()
    body = assert_error(_respond(api_client, reply), 409, "credential_unavailable")
    assert body["details"] == {"reason": "deleted"}
    assert not ReplyResponse.objects.exists()


@pytest.mark.parametrize(
    ("field", "reason"), [("unsubscribed_at", "unsubscribed"), ("bounced_at", "bounced")]
)
def test_a_suppressed_contact_is_409(api_client, account, sink, field, reason):
    """Someone who asked to be removed (even in a reply) must not get email from the
    service again, a person's answer included."""
    reply = _reply(account, sink)
    Contact.objects.filter(pk=reply.contact_id).update(**{field: NOW})
    body = assert_error(_respond(api_client, reply), 409, "contact_suppressed")
    assert body["details"] == {"reason": reason}
    assert not ReplyResponse.objects.exists() and sink.messages == []


@pytest.mark.parametrize(
    ("entry", "from_email"),
    [
        ("ada@example.org", None),  # the address
        ("example.org", None),  # its domain
        ("EU.Example.org", "ada@eu.example.org"),  # a subdomain's, the reply from there
        ("ada@example.org", "assistant@other.example"),  # the contact's, the reply elsewhere
    ],
)
def test_a_blocked_recipient_is_422_and_gets_nothing(api_client, account, sink, entry, from_email):
    """The blocklist holds for a person's answer as for a step: never sent to."""
    reply = _reply(account, sink, **({"from_email": from_email} if from_email else {}))
    assert api_client.post("/blocklist", {"entries": [entry]}, format="json").status_code == 201
    body = assert_error(_respond(api_client, reply), 422, "contact_blocked")
    assert body["details"] == {"reason": "blocked", "entry": entry.lower()}
    assert not ReplyResponse.objects.exists() and sink.messages == []


def test_an_address_suppressed_though_not_the_contacts_is_409(api_client, account, sink):
    """The reply came from a colleague who unsubscribed from another campaign."""
    reply = _reply(account, sink, from_email="Bob@Example.org")
    suppression_record(
        account_id=account.pk, email="bob@example.org", reason="unsubscribed", at=NOW
    )
    body = assert_error(_respond(api_client, reply), 409, "contact_suppressed")
    assert body["details"] == {"reason": "unsubscribed"}
    assert not ReplyResponse.objects.exists() and sink.messages == []


def test_an_address_blocked_after_the_response_was_written_gets_nothing(account, sink):
    reply = _reply(account, sink)
    response = response_create(account=account, reply=reply, body_text="Hi.")
    blocklist_add(account=account, values=["example.org"])

    assert response_send(response_id=response.pk) == "failed"

    response.refresh_from_db()
    assert (response.status, response.error) == ("failed", BLOCKED_ERROR)
    assert sink.messages == []


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"body_text"}),
        ({"body_text": ""}, {"body_text"}),
        ({"body_text": " \n "}, {"body_text"}),
        ({"body_text": None}, {"body_text"}),
        ({"body_text": 5}, {"body_text"}),
        ({"body_text": ["a"]}, {"body_text"}),
        ({"body_text": "Hi", "body_html": True}, {"body_html"}),
        ({"body_text": "x" * 51}, {"body_text"}),
        ({"body_text": "Hi", "body_html": "x" * 51}, {"body_html"}),
        ({"body_text": "Hi", "bodyhtml": "<p>Hi</p>"}, {"bodyhtml"}),
        (["body_text"], {"non_field_errors"}),
    ],
)
def test_bad_bodies_are_422_and_write_nothing(api_client, account, sink, settings, body, fields):
    settings.REPLY_BODY_MAX_CHARS = 50
    reply = _reply(account, sink)
    assert_fields(_respond(api_client, reply, body), *fields)
    assert not ReplyResponse.objects.exists()


def test_a_body_at_the_bound_is_accepted(api_client, account, sink, settings):
    settings.REPLY_BODY_MAX_CHARS = 50
    reply = _reply(account, sink)
    body = {"body_text": "x" * 50, "body_html": "y" * 50}
    assert _respond(api_client, reply, body).status_code == 201


def test_malformed_json_is_400(api_client, account, sink):
    reply = _reply(account, sink)
    answer = api_client.post(
        f"/replies/{reply.pk}/respond", "{nope", content_type="application/json"
    )
    assert_error(answer, 400, "invalid_json")


def test_another_accounts_reply_is_404(api_client, other_client, account, sink):
    reply = _reply(account, sink)
    assert_error(_respond(other_client, reply), 404, "reply_not_found")
    answer = other_client.post("/replies/not-a-uuid/respond", {"body_text": "x"}, format="json")
    assert_error(answer, 404, "reply_not_found")
    assert not ReplyResponse.objects.exists() and sink.messages == []


def test_only_post_is_allowed(api_client, account, sink):
    reply = _reply(account, sink)
    assert_error(api_client.get(f"/replies/{reply.pk}/respond"), 405, "method_not_allowed")


def test_it_needs_a_key(anon_client, account, sink):
    reply = _reply(account, sink)
    assert_error(_respond(anon_client, reply), 401, "authentication_required")


# --- usage and cost -------------------------------------------------------------------------


def test_a_response_is_counted_and_not_blocked_by_the_soft_cap(
    api_client, account, sink, django_capture_on_commit_callbacks
):
    record = usage_record_current(account=account)
    limit = account.plan.monthly_limit
    usage_set(record, limit)
    reply = _reply(account, sink)

    with django_capture_on_commit_callbacks(execute=True):
        assert _respond(api_client, reply).status_code == 201

    assert len(sink.messages) == 1
    assert _usage(account) == limit + 1


def test_the_endpoint_costs_a_fixed_number_of_queries(
    api_client, account, sink, auth_queries, django_assert_num_queries
):
    reply = _reply(account, sink)
    # The reply with its mailbox and contact (one read), the blocklist (one read), the
    # response's INSERT inside a savepoint pair, and the audit row's INSERT, all inside
    # the request's own transaction (a savepoint pair here, inside the test's).
    with django_assert_num_queries(auth_queries + 8):
        assert _respond(api_client, reply).status_code == 201
