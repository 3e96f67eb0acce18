"""The SDK's conversations against the live service: replies listed page after page and
filtered, read and labelled, typed; the thread of an enrollment; and a response sent to a
real SMTP server, once, whatever the retries."""

from datetime import UTC, date, datetime, timedelta

import pytest
from django.utils import timezone
from outreach_sdk import Client, errors, models

from outreach.models.mailboxes import SmtpCredential
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.conversations.reply_rows import reply_for, response_to
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CampaignFactory

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def client(service_url, sdk_key) -> Client:
    return Client(api_key=sdk_key, base_url=service_url)


def test_replies_are_listed_page_after_page_newest_first(client, sdk_account, proxy):
    enrollment = sent_enrollment(account=sdk_account)
    made = [reply_for(enrollment) for _ in range(5)]
    paging = Client(api_key=client._transport.api_key, base_url=proxy.url)

    listed = list(paging.replies.list(limit=2))

    assert [r.id for r in listed] == [str(r.pk) for r in reversed(made)]
    assert all(isinstance(r, models.Reply) for r in listed)
    pages = [path for method, path, _ in proxy.requests if path.startswith("/replies")]
    assert len(pages) == 3
    assert "starting_after=" not in pages[0] and "starting_after=" in pages[2]


def test_a_reply_comes_back_typed(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    back_on = timezone.now().date() + timedelta(days=3)
    made = reply_for(
        enrollment,
        cc=["boss@client.example"],
        attachments=[{"filename": "deck.pdf", "content_type": "application/pdf", "size": 1200}],
        label="out_of_office",
        label_source="auto",
        returns_on=back_on,
        sender_verified=False,
    )

    reply = client.replies.get(str(made.pk))

    assert reply == client.replies.retrieve(str(made.pk))
    assert (reply.id, reply.enrollment_id) == (str(made.pk), str(enrollment.pk))
    assert (reply.campaign_id, reply.contact_id) == (
        str(enrollment.campaign_id),
        str(enrollment.contact_id),
    )
    assert reply.credential_id == str(enrollment.credential_id)
    assert (reply.from_email, reply.from_name) == (enrollment.contact.email, "Ada Lovelace")
    assert reply.cc == ["boss@client.example"]
    assert reply.new_text == "Sounds good." and reply.text.startswith("Sounds good.")
    assert reply.html == "<p>Sounds good.</p>"
    assert reply.attachments == [
        models.Attachment(filename="deck.pdf", content_type="application/pdf", size=1200)
    ]
    assert (reply.label, reply.label_source, reply.read) == ("out_of_office", "auto", False)
    assert reply.sender_verified is False
    assert reply.returns_on == back_on and isinstance(reply.returns_on, date)
    assert reply.received_at == made.received_at and reply.received_at.tzinfo is not None
    assert reply.in_reply_to == made.in_reply_to
    assert reply.body_purged_at is None and reply.truncated is False
    assert reply.raw["subject"] == "Re: Hello"


def test_the_list_filters(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    other = sent_enrollment(account=sdk_account)
    old = reply_for(enrollment, received_at=timezone.now() - timedelta(days=2), read=True)
    labelled = reply_for(enrollment, label="interested", label_source="manual")
    elsewhere = reply_for(other)

    def ids(**filters) -> set[str]:
        return {r.id for r in client.replies.list(**filters)}

    assert ids(campaign_id=str(other.campaign_id)) == {str(elsewhere.pk)}
    assert ids(enrollment_id=str(enrollment.pk)) == {str(old.pk), str(labelled.pk)}
    assert ids(credential_id=str(other.credential_id)) == {str(elsewhere.pk)}
    assert ids(label="interested") == {str(labelled.pk)}
    assert ids(read=True) == {str(old.pk)}
    assert ids(read=False) == {str(labelled.pk), str(elsewhere.pk)}
    yesterday = datetime.now(UTC) - timedelta(days=1)
    recent = {str(labelled.pk), str(elsewhere.pk)}
    assert ids(received_after=yesterday) == recent
    assert ids(received_after=yesterday.replace(tzinfo=None)) == recent
    assert ids(received_after=yesterday.strftime("%Y-%m-%dT%H:%M:%SZ")) == recent

    with pytest.raises(errors.ValidationFailed) as raised:
        list(client.replies.list(label="happy"))
    assert list(raised.value.details["fields"]) == ["label"]


def test_a_reply_is_marked_read_and_labelled(client, sdk_account):
    made = reply_for(sent_enrollment(account=sdk_account), label="auto_reply", label_source="auto")
    reply_id = str(made.pk)

    reply = client.replies.update(reply_id, read=True, label="interested")
    assert (reply.read, reply.label, reply.label_source) == (True, "interested", "manual")

    reply = client.replies.update(reply_id, read=False)  # the label stays
    assert (reply.read, reply.label) == (False, "interested")

    reply = client.replies.update(reply_id, label=None)  # clears it; read stays
    assert (reply.read, reply.label, reply.label_source) == (False, None, None)
    made.refresh_from_db()
    assert (made.read, made.label, made.label_source) == (False, "", "")

    with pytest.raises(errors.ValidationFailed) as raised:
        client.replies.update(reply_id, label="happy")
    assert list(raised.value.details["fields"]) == ["label"]


def test_another_accounts_reply_is_not_found(client):
    theirs = reply_for(sent_enrollment(account=AccountFactory()))

    with pytest.raises(errors.ReplyNotFound) as raised:
        client.replies.get(str(theirs.pk))
    assert raised.value.status == 404
    with pytest.raises(errors.ReplyNotFound):
        client.replies.update(str(theirs.pk), read=True)
    assert list(client.replies.list()) == []
    theirs.refresh_from_db()
    assert theirs.read is False


def test_the_thread_of_an_enrollment_is_typed_and_in_time_order(client, sdk_account):
    enrollment = sent_enrollment(account=sdk_account, steps_sent=2)
    step1, step2 = enrollment.messages.order_by("step")
    reply = reply_for(enrollment, received_at=step2.sent_at + timedelta(minutes=5))
    answer = response_to(reply, body_text="Great, Tuesday?")

    thread = client.campaigns.thread(str(enrollment.campaign_id), str(enrollment.pk))

    assert [e.type for e in thread] == ["step", "step", "reply", "response"]
    assert [e.at for e in thread] == sorted(e.at for e in thread)
    first = thread[0]
    assert isinstance(first.step, models.ThreadStep) and first.item is first.step
    assert (first.step.step, first.step.message_id, first.step.to) == (
        1,
        step1.message_id,
        step1.to_email,
    )
    assert first.step.sent_at == step1.sent_at and first.reply is None
    assert isinstance(thread[2].reply, models.Reply) and thread[2].reply.id == str(reply.pk)
    response = thread[3].response
    assert isinstance(response, models.ReplyResponse) and thread[3].item is response
    assert (response.id, response.reply_id) == (str(answer.pk), str(reply.pk))
    assert (response.status, response.text, response.error) == ("sent", "Great, Tuesday?", None)


def test_the_thread_of_another_accounts_enrollment_is_not_found(client, sdk_account):
    theirs = sent_enrollment(account=AccountFactory())
    mine = sent_enrollment(account=sdk_account)

    with pytest.raises(errors.CampaignNotFound):
        client.campaigns.thread(str(theirs.campaign_id), str(theirs.pk))
    with pytest.raises(errors.EnrollmentNotFound):
        client.campaigns.thread(str(mine.campaign_id), str(theirs.pk))


def test_a_response_goes_out_once_in_the_thread(client, sdk_account, smtp_sink):
    sink = smtp_sink()
    credential = SmtpCredential.objects.get(pk=mailbox_create(client, sink).id)
    campaign = CampaignFactory(account=sdk_account, with_steps=2, with_credential=False)
    campaign.credentials.add(credential)
    enrollment = sent_enrollment(campaign=campaign)
    reply = reply_for(enrollment, subject="Re: Hello")

    preview = client.replies.respond_preview(str(reply.pk), "Tuesday at 10?")
    assert isinstance(preview, models.ResponsePreview)
    assert (preview.subject, preview.to, preview.refusal) == (
        "Re: Hello",
        enrollment.contact.email,
        None,
    )
    shown = {h["name"]: h["value"] for h in preview.headers}
    assert sink.messages == []  # the preview sends nothing

    answer = client.replies.respond(str(reply.pk), "Tuesday at 10?", idempotency_key="answer-1")
    again = client.replies.respond(str(reply.pk), "Tuesday at 10?", idempotency_key="answer-1")

    assert isinstance(answer, models.ReplyResponse)
    assert (answer.reply_id, answer.enrollment_id) == (str(reply.pk), str(enrollment.pk))
    assert (answer.subject, answer.to) == ("Re: Hello", enrollment.contact.email)
    assert again.id == answer.id  # the same response: the key replayed it
    [received] = sink.wait_for(1)
    message = received.message
    assert message["In-Reply-To"] == f"<{reply.message_id}>"
    assert message["Subject"] == "Re: Hello"
    assert all(message[name] == value for name, value in shown.items())
    assert message.get_content().strip() == "Tuesday at 10?"
    thread = client.campaigns.thread(str(campaign.pk), str(enrollment.pk))
    [response] = [e.response for e in thread if e.type == "response"]
    assert (response.id, response.status, response.text) == (answer.id, "sent", "Tuesday at 10?")
    assert len(sink.messages) == 1

    with pytest.raises(errors.ValidationFailed) as raised:
        client.replies.respond(str(reply.pk), "")
    assert list(raised.value.details["fields"]) == ["body_text"]
