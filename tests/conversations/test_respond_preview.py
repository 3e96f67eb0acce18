"""POST /replies/:id/respond/preview: what POST /replies/:id/respond with the same body
would send (the subject, the headers as the message carries them, the refusal it would
answer), read by the respond's own functions and written nowhere."""

from datetime import UTC, datetime
from email.utils import formataddr

import pytest

from accounts.services import api_key_create
from outreach.blocklist.services import blocklist_add
from outreach.conversations.respond import response_create
from outreach.conversations.response_sending import response_send
from outreach.models.conversations import ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from tests.conftest import client_for
from tests.conversations.test_respond import ADA, _reply
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


@pytest.fixture
def sink(smtp_sink):
    return smtp_sink()


def _preview(client, reply, body=None):
    body = {"body_text": "Happy to. Tuesday at 10?"} if body is None else body
    return client.post(f"/replies/{reply.pk}/respond/preview", body, format="json")


def test_it_shows_the_subject_and_headers_the_response_is_sent_with(api_client, account, sink):
    reply = _reply(
        account,
        sink,
        subject="RE: Re:Hello Ada 1",
        message_id="reply1@mail.example.org",
        references=["step1@sender.example.com"],
    )
    body = {"body_text": "Happy to.", "body_html": "<p>Happy to.</p>"}

    answer = _preview(api_client, reply, body)

    assert answer.status_code == 200, answer.content
    assert answer.json() == {
        "reply_id": str(reply.pk),
        "credential_id": str(reply.credential_id),
        "to": ADA,
        "subject": "Re: Hello Ada 1",
        "in_reply_to": "reply1@mail.example.org",
        "references": ["step1@sender.example.com", "reply1@mail.example.org"],
        "headers": [
            {"name": "From", "value": formataddr(("Sam Sender", "sam@sender.example.com"))},
            {"name": "To", "value": formataddr(("Ada Lovelace", ADA))},
            {"name": "Subject", "value": "Re: Hello Ada 1"},
            {"name": "In-Reply-To", "value": "<reply1@mail.example.org>"},
            {"name": "References", "value": "<step1@sender.example.com> <reply1@mail.example.org>"},
        ],
        "body_text": "Happy to.",
        "body_html": "<p>Happy to.</p>",
        "refusal": None,
    }
    assert not ReplyResponse.objects.exists() and sink.messages == []  # nothing written

    # The response sent carries exactly these headers.
    response = response_create(account=account, reply=reply, **body)
    assert response_send(response_id=response.pk) == "sent"
    message = sink.messages[0].message
    for header in answer.json()["headers"]:
        assert message[header["name"]] == header["value"]


def test_a_long_subject_is_cut_at_998_characters_on_one_line(api_client, account, sink):
    reply = _reply(account, sink, subject="a" * 500 + "\r\n " + "b" * 495)  # 998
    subject = _preview(api_client, reply).json()["subject"]
    assert subject == ("Re: " + "a" * 500 + " " + "b" * 495)[:998]
    assert len(subject) == 998
    response = response_create(account=account, reply=reply, body_text="Hi.")
    assert response.subject == subject


def test_the_refusal_the_respond_would_answer_is_shown(api_client, account, sink):
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).update(disabled_at=NOW)
    refusal = _preview(api_client, reply).json()["refusal"]
    assert refusal["status"] == 409
    assert refusal["code"] == "credential_unavailable"
    assert refusal["details"] == {"reason": "disabled"}
    assert refusal["type"].endswith("/errors/credential_unavailable")
    assert_error(
        api_client.post(f"/replies/{reply.pk}/respond", {"body_text": "x"}, format="json"),
        409,
        "credential_unavailable",
    )


def test_a_blocked_recipient_is_the_422_refusal(api_client, account, sink):
    reply = _reply(account, sink)
    blocklist_add(account=account, values=["example.org"])
    refusal = _preview(api_client, reply).json()["refusal"]
    assert (refusal["status"], refusal["code"]) == (422, "contact_blocked")
    assert refusal["details"] == {"reason": "blocked", "entry": "example.org"}


def test_a_deleted_mailbox_has_no_headers_and_is_refused(api_client, account, sink):
    reply = _reply(account, sink)
    SmtpCredential.objects.filter(pk=reply.credential_id).delete()
    data = _preview(api_client, reply).json()
    assert (data["credential_id"], data["headers"]) == (None, [])
    assert data["refusal"]["details"] == {"reason": "deleted"}


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"body_text"}),
        ({"body_text": " "}, {"body_text"}),
        ({"body_text": "Hi", "bodyhtml": "<p>Hi</p>"}, {"bodyhtml"}),
    ],
)
def test_bad_bodies_are_the_respond_422(api_client, account, sink, body, fields):
    reply = _reply(account, sink)
    assert_fields(_preview(api_client, reply, body), *fields)


def test_another_accounts_reply_is_404(other_client, account, sink):
    reply = _reply(account, sink)
    assert_error(_preview(other_client, reply), 404, "reply_not_found")
    answer = other_client.post("/replies/nope/respond/preview", {"body_text": "x"}, format="json")
    assert_error(answer, 404, "reply_not_found")


def test_a_reader_key_may_preview(account, sink):
    reader = client_for(api_key_create(account=account, label="r", role="reader").plaintext)
    reply = _reply(account, sink)
    assert _preview(reader, reply).status_code == 200
