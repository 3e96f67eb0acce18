"""End to end with real peers: PostgreSQL, Redis, a real Celery worker, a real HTTP
receiver and (for replies) the real Dovecot. The test process plays the web
process: its requests commit, and the event deliveries they enqueue go through
the broker to the worker, which POSTs them to the receiver."""

import json

import pytest
from django.test import Client

from config.celery import app
from outreach.campaigns.clicks import click_token_make
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.mail import reply
from tests.support.celery_worker import send_task
from tests.webhooks.factories import TEST_SECRET, WebhookFactory
from webhooks.secrets import signature_header

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def web_process():
    """Enqueue on the real broker, as the web process does (tests run eager)."""
    previous = app.conf.task_always_eager
    app.conf.task_always_eager = False
    yield
    app.conf.task_always_eager = previous


def received_event(request) -> dict:
    header = request.headers["X-Service-Signature"]
    timestamp = int(header.split(",")[0].removeprefix("t="))
    assert header == signature_header(secret=TEST_SECRET, body=request.body, timestamp=timestamp)
    return json.loads(request.body)


def test_opens_and_unsubscribes_reach_the_receiver_through_the_worker(
    live_db, celery_worker, receiver, web_process
):
    enrollment = sent_enrollment()
    WebhookFactory(account=enrollment.campaign.account, url=receiver.url)
    celery_worker()
    client = Client()

    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
    assert client.get(f"/t/o/{pixel}.gif").status_code == 200
    client.get(f"/t/o/{pixel}.gif")  # a repeat fires nothing
    [opened] = receiver.wait_for(1)
    body = received_event(opened)
    assert body["type"] == "enrollment.opened"
    assert body["data"]["enrollment_id"] == str(enrollment.pk)
    assert body["data"]["status"] == "sent"

    link = tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk)
    response = client.post(
        f"/u/{link}",
        data="List-Unsubscribe=One-Click",
        content_type="application/x-www-form-urlencoded",
    )
    assert response.status_code == 200
    _, unsubscribed = receiver.wait_for(2)
    body = received_event(unsubscribed)
    assert body["type"] == "enrollment.unsubscribed"
    assert body["data"]["enrollment_id"] == str(enrollment.pk)
    assert body["data"]["unsubscribed_at"] is not None
    assert len(receiver.requests) == 2


@requires_dovecot
@pytest.mark.filterwarnings("ignore:task_always_eager has no effect on send_task")
def test_a_reply_in_the_mailbox_reaches_the_receiver(
    live_db, celery_worker, receiver, imap_mailbox
):
    enrollment = sent_enrollment()
    WebhookFactory(account=enrollment.campaign.account, url=receiver.url)
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.imap_host = imap_mailbox.host
    credential.imap_port = imap_mailbox.port
    credential.imap_username = imap_mailbox.username
    credential.imap_password = imap_mailbox.password
    credential.imap_security = "none"
    credential.save()
    imap_mailbox.append(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            in_reply_to=first_message(enrollment).message_id,
        )
    )
    celery_worker()

    send_task("outreach.tasks.intake_poll_mailbox", str(credential.pk))

    [replied] = receiver.wait_for(1, timeout=30)
    body = received_event(replied)
    assert body["type"] == "enrollment.replied"
    assert body["data"]["status"] == "replied"
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED


def test_a_click_reaches_only_the_webhook_that_asked_for_it(
    live_db, celery_worker, receiver, web_process
):
    enrollment = sent_enrollment()
    account = enrollment.campaign.account
    WebhookFactory(account=account, url=f"{receiver.url}?all", event_filters=["*"])
    WebhookFactory(
        account=account, url=f"{receiver.url}?clicks", event_filters=["enrollment.clicked"]
    )
    celery_worker()
    client = Client()

    link = click_token_make(
        enrollment_id=enrollment.pk, step=1, variant="A", url="https://acme.example/pricing"
    )
    response = client.get(f"/t/c/{link}")
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk)
    client.get(f"/t/o/{pixel}.gif")
    received = {
        request.path.rsplit("?", 1)[-1]: received_event(request) for request in receiver.wait_for(2)
    }
    assert received["clicks"]["type"] == "enrollment.clicked"
    assert received["clicks"]["data"]["url"] == "https://acme.example/pricing"
    assert received["all"]["type"] == "enrollment.opened"
    assert len(receiver.requests) == 2
