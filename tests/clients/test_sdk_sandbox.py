"""The SDK's sandbox methods: `mailboxes.inbound` against the live service (the message
kept as a reply, typed answers, the errors as their classes), and `create_simulator` and
`campaigns.advance` against their contract (API.md section 18): the requests they make
and the answers they read, through a transport that plays the service; and against the
live service wherever it serves those endpoints."""

import json

import pytest
import requests
from django.urls import Resolver404, resolve
from outreach_sdk import Client, errors, models

from outreach.models.conversations import Reply
from tests.intake.simulator import simulated_send
from tests.outreach.factories import CredentialFactory

pytestmark = [pytest.mark.e2e]


def _served(path: str) -> bool:
    """Whether the service has an endpoint of its own at `path` (a mailbox's detail
    route, which takes any id, does not count)."""
    try:
        match = resolve(path)
    except Resolver404:
        return False
    return match.url_name != "smtp-credential-detail"


# The simulator mailbox's creation and the test clock are endpoints of their own; where
# this service does not serve them, their live tests wait for it.
serves_sandbox_endpoints = pytest.mark.skipif(
    not (
        _served("/smtp_credentials/simulator")
        and _served("/campaigns/8d6c1a40-1b8e-4a2b-9d2e-5a0b1c2d3e4f/advance")
    ),
    reason="POST /smtp_credentials/simulator and POST /campaigns/:id/advance are not served",
)


@pytest.fixture
def client(service_url, sdk_key) -> Client:
    return Client(api_key=sdk_key, base_url=service_url)


def reply_to(message) -> bytes:
    return (
        f"From: Ada <{message.to_email}>\r\n"
        f"To: {message.credential.from_email}\r\n"
        "Subject: Re: Quick question\r\n"
        "Date: Sat, 28 Nov 2026 10:00:00 +0000\r\n"
        "Message-ID: <saved-1@client.example>\r\n"
        f"In-Reply-To: <{message.message_id}>\r\n"
        f"References: <{message.message_id}>\r\n"
        "\r\n"
        "Yes, let's talk on Tuesday.\r\n"
    ).encode()


def test_inbound_hands_a_message_to_a_simulator_mailbox(client, sdk_account):
    enrollment, message, _ = simulated_send("x", account=sdk_account)

    queued = client.mailboxes.inbound(str(message.credential_id), reply_to(message))

    assert isinstance(queued, models.InboundMessage)
    assert (queued.credential_id, queued.message_id, queued.size) == (
        str(message.credential_id),
        "saved-1@client.example",
        len(reply_to(message)),
    )
    [reply] = list(client.replies.list())
    assert (reply.enrollment_id, reply.new_text) == (
        str(enrollment.pk),
        "Yes, let's talk on Tuesday.",
    )
    again = client.mailboxes.inbound(str(message.credential_id), reply_to(message).decode())
    assert again.message_id == "saved-1@client.example"
    assert Reply.objects.count() == 1


def test_inbound_errors_are_their_classes(service_server, sdk_key, sdk_account):
    client = Client(api_key=sdk_key, base_url=service_server(IMAP_MAX_MESSAGE_BYTES="300"))
    _, message, _ = simulated_send("x", account=sdk_account)
    real = CredentialFactory(account=sdk_account)
    _, theirs, _ = simulated_send("x")

    with pytest.raises(errors.CredentialNotSimulated) as refused:
        client.mailboxes.inbound(str(real.pk), "Subject: x\r\n\r\ny")
    assert (refused.value.status, refused.value.details) == (409, {"auth_method": "password"})
    with pytest.raises(errors.CredentialNotFound):
        client.mailboxes.inbound(str(theirs.credential_id), "Subject: x\r\n\r\ny")
    with pytest.raises(errors.PayloadTooLarge) as large:
        client.mailboxes.inbound(str(message.credential_id), "Subject: x\r\n\r\n" + "y" * 300)
    assert large.value.details == {"limit_bytes": 300, "field": "raw"}
    with pytest.raises(errors.ValidationFailed):
        client.mailboxes.inbound(str(message.credential_id), "")


# --- against the contract ----------------------------------------------------------------


class Contract(requests.adapters.BaseAdapter):
    """Plays the service: each request recorded, answered by `answer(method, path, body)`
    -> (status, JSON)."""

    def __init__(self, answer):
        super().__init__()
        self.answer, self.seen = answer, []

    def send(self, request, **kwargs):
        path = request.path_url
        body = json.loads(request.body) if request.body else None
        self.seen.append((request.method, path, body, dict(request.headers)))
        status, payload = self.answer(request.method, path, body)
        response = requests.Response()
        response.status_code = status
        response._content = json.dumps(payload).encode()
        response.headers["Content-Type"] = "application/json"
        response.request = request
        response.url = request.url
        return response

    def close(self):
        pass


def _played(answer) -> tuple[Client, Contract]:
    client = Client(api_key="ak_live_test", base_url="http://service.test", max_retries=0)
    contract = Contract(answer)
    client._transport.session.mount("http://service.test", contract)
    return client, contract


def test_create_simulator_posts_the_mailbox_and_reads_it_back():
    made = {"id": "m1", "from_email": "sam@sandbox.example", "auth_method": "simulator"}
    client, contract = _played(lambda method, path, body: (201, made))

    mailbox = client.mailboxes.create_simulator(
        from_email="sam@sandbox.example", from_name="Sam", min_interval_seconds=0
    )

    assert (mailbox.id, mailbox.auth_method) == ("m1", "simulator")
    [(method, path, body, _)] = contract.seen
    assert (method, path) == ("POST", "/smtp_credentials/simulator")
    assert body == {
        "from_email": "sam@sandbox.example",
        "from_name": "Sam",
        "min_interval_seconds": 0,
    }


def test_advance_posts_the_minutes_with_an_idempotency_key():
    client, contract = _played(lambda method, path, body: (200, {"campaign_id": "c1", "moved": 3}))

    moved = client.campaigns.advance("c1", 1440, idempotency_key="clock-1")

    assert isinstance(moved, models.ClockAdvance)
    assert (moved.campaign_id, moved.moved) == ("c1", 3)
    [(method, path, body, headers)] = contract.seen
    assert (method, path, body) == ("POST", "/campaigns/c1/advance", {"minutes": 1440})
    assert headers["Idempotency-Key"] == "clock-1"


def test_a_campaign_with_a_real_mailbox_raises_campaign_not_simulated():
    refusal = {
        "type": "http://service.test/docs/errors/campaign_not_simulated",
        "code": "campaign_not_simulated",
        "message": "The campaign has a mailbox that is not a simulator.",
    }
    client, _ = _played(lambda method, path, body: (409, refusal))
    with pytest.raises(errors.CampaignNotSimulated) as refused:
        client.campaigns.advance("c1", 60)
    assert isinstance(refused.value, errors.ConflictError)
    assert refused.value.code == "campaign_not_simulated"


# --- against the live service, where it serves them -------------------------------------


@serves_sandbox_endpoints
def test_a_simulator_mailbox_and_its_clock_live(client, sdk_account):
    mailbox = client.mailboxes.create_simulator(from_email="sam@sandbox.example")
    assert mailbox.auth_method == "simulator"
    campaign = client.campaigns.create(
        name="Rehearsal",
        credential_ids=[mailbox.id],
        steps=[{"subject": "Hi", "body_text": "Hello.", "delay_minutes": 0}],
    )
    assert client.campaigns.advance(campaign.id, 60).moved == 0  # a draft: nothing waits
    real = CredentialFactory(account=sdk_account)
    mixed = client.campaigns.create(
        name="Mixed",
        credential_ids=[str(real.pk)],
        steps=[{"subject": "Hi", "body_text": "Hello.", "delay_minutes": 0}],
    )
    with pytest.raises(errors.CampaignNotSimulated):
        client.campaigns.advance(mixed.id, 60)
