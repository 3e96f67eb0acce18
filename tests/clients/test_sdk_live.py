"""The SDK against the live service (the web server on a free port, this run's test database):
its methods, its errors, its paginating iterators, and its retries through a proxy that
fails requests on purpose, with real HTTP on both sides."""

import pytest
from outreach_sdk import APIConnectionError, Client, _transport, errors

from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.outreach.factories import CampaignFactory, ContactFactory

pytestmark = [pytest.mark.e2e]

STEPS = [{"subject": "Hello {{first_name|there}}", "body_text": "Hi.", "delay_minutes": 0}]


@pytest.fixture
def sleeps(monkeypatch):
    """The waits the SDK asked for between attempts (shortened, so the test is quick)."""
    asked = []
    monkeypatch.setattr(_transport, "sleep", asked.append)
    return asked


def _posts(proxy, path):
    return [headers for method, p, headers in proxy.requests if method == "POST" and p == path]


def test_it_works_a_campaign_from_mailbox_to_enrollments(
    service_url, sdk_key, sdk_account, smtp_sink
):
    sink = smtp_sink()
    client = Client(api_key=sdk_key, base_url=service_url)
    mailbox = mailbox_create(client, sink)
    assert mailbox.verification["smtp"]["ok"] is True
    assert [m.id for m in client.mailboxes.list()] == [mailbox.id]

    campaign = client.campaigns.create(name="Q4", steps=STEPS, credential_ids=[mailbox.id])
    assert (campaign.status, campaign.credential_ids) == ("draft", [mailbox.id])
    campaign = client.campaigns.update(campaign.id, name="Q4 launch")
    assert client.campaigns.retrieve(campaign.id).name == "Q4 launch"

    imported = client.contact_imports.upload_csv(
        b"email,first_name\nlin@example.com,Lin\nsam@example.com,Sam\n",
        campaign_id=campaign.id,
    )
    assert client.contact_imports.retrieve(imported.id).status == "completed"
    pending = list(client.campaigns.enrollments(campaign.id, status="pending"))
    assert sorted(e.contact_email for e in pending) == ["lin@example.com", "sam@example.com"]

    preview = client.campaigns.dispatch_preview(campaign.id, all_pending=True)
    assert (preview.dispatched, preview.refusal, preview.has_more) == (2, None, False)
    assert sorted(c["email"] for c in preview.contacts) == ["lin@example.com", "sam@example.com"]
    assert preview.first_send_at is not None  # step 1's delay from now, no window
    assert client.campaigns.dispatch(campaign.id, all_pending=True).dispatched == 2
    assert client.campaigns.pause(campaign.id).status == "paused"
    assert client.campaigns.resume(campaign.id).status == "active"
    assert {e.status for e in client.campaigns.enrollments(campaign.id)} == {"scheduled"}

    enrollment = client.outreaches.create(
        campaign_id=campaign.id, contact={"email": "kim@example.com", "first_name": "Kim"}
    )
    assert (enrollment.contact_email, enrollment.status) == ("kim@example.com", "scheduled")
    assert client.campaigns.retrieve(campaign.id).stats["enrolled"] == 3
    assert client.billing.usage().by_client_kind["sdk"] > 0


def test_the_envelope_comes_back_as_its_exception(service_url, sdk_key):
    client = Client(api_key=sdk_key, base_url=service_url)
    others = CampaignFactory(account=AccountFactory())

    with pytest.raises(errors.CampaignNotFound) as raised:
        client.campaigns.retrieve(str(others.pk))
    assert (raised.value.status, raised.value.code) == (404, "campaign_not_found")
    assert raised.value.message == "No such campaign."

    with pytest.raises(errors.ValidationFailed) as raised:
        client.contacts.create(email="not an address")
    assert raised.value.status == 422
    assert list(raised.value.details["fields"]) == ["email"]

    with pytest.raises(errors.CampaignNotDispatchable) as raised:
        draft = client.campaigns.create(name="empty")
        client.campaigns.dispatch(draft.id, all_pending=True)
    assert raised.value.status == 409
    # Its preview shows that refusal instead of raising it.
    refusal = client.campaigns.dispatch_preview(draft.id, all_pending=True).refusal
    assert refusal is not None
    assert (refusal["status"], refusal["code"]) == (409, "campaign_not_dispatchable")

    with pytest.raises(errors.InvalidApiKey) as raised:
        Client(api_key="ak_live_" + "x" * 43, base_url=service_url).campaigns.retrieve(draft.id)
    assert isinstance(raised.value, errors.AuthenticationError)


def test_lists_follow_every_page(service_url, sdk_key, sdk_account, proxy):
    made = [ContactFactory(account=sdk_account) for _ in range(5)]
    client = Client(api_key=sdk_key, base_url=proxy.url)

    listed = list(client.contacts.list(limit=2))

    assert [c.id for c in listed] == [str(c.pk) for c in reversed(made)]  # newest first
    pages = [path for method, path, _ in proxy.requests if path.startswith("/contacts")]
    assert len(pages) == 3
    assert "starting_after=" not in pages[0] and "starting_after=" in pages[2]


def test_a_429_is_retried_after_its_retry_after(service_url, sdk_key, sdk_account, proxy, sleeps):
    proxy.fail("POST", "/campaigns", "429")
    client = Client(api_key=sdk_key, base_url=proxy.url)

    campaign = client.campaigns.create(name="Q4", steps=STEPS)

    assert sleeps == [1]  # the proxy's Retry-After
    first, second = _posts(proxy, "/campaigns")
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert list(Campaign.objects.filter(account=sdk_account).values_list("pk", flat=True)) == [
        Campaign.objects.get(pk=campaign.id).pk
    ]


def test_a_retry_after_longer_than_the_client_accepts_raises_at_once(service_server, sleeps):
    # The service's own signup limit (one per hour per IP here) answers the second signup.
    client = Client(base_url=service_server(SIGNUP_RATE_LIMIT="1"), max_retry_wait=60)
    client.signup(email="first@example.com")

    with pytest.raises(errors.RateLimited) as raised:
        client.signup(email="second@example.com")

    assert raised.value.status == 429 and raised.value.retry_after > 60
    assert raised.value.details == {"limit": 1, "period": 3600}
    assert sleeps == []


def test_a_dropped_connection_is_retried_without_creating_twice(
    service_url, sdk_key, sdk_account, proxy, sleeps
):
    proxy.fail("POST", "/campaigns", "drop")
    client = Client(api_key=sdk_key, base_url=proxy.url)

    campaign = client.campaigns.create(name="Q4", steps=STEPS)

    first, second = _posts(proxy, "/campaigns")
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert len(sleeps) == 1
    rows = Campaign.objects.filter(account=sdk_account)
    assert [str(pk) for pk in rows.values_list("pk", flat=True)] == [campaign.id]


def test_a_dropped_csv_upload_is_retried_without_importing_twice(
    service_url, sdk_key, sdk_account, proxy, sleeps
):
    proxy.fail("POST", "/contact_imports", "drop")
    client = Client(api_key=sdk_key, base_url=proxy.url)

    imported = client.contact_imports.upload_csv(b"email\nlin@example.com\nsam@example.com\n")

    first, second = _posts(proxy, "/contact_imports")
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    assert [str(pk) for pk in ContactImport.objects.values_list("pk", flat=True)] == [imported.id]
    assert Contact.objects.filter(account=sdk_account).count() == 2


def test_a_post_without_idempotency_is_not_sent_again_after_a_drop(
    service_url, sdk_key, sdk_account, proxy, sleeps
):
    proxy.fail("POST", "/contacts", "drop")
    client = Client(api_key=sdk_key, base_url=proxy.url)

    with pytest.raises(APIConnectionError):
        client.contacts.create(email="lin@example.com")

    assert len(_posts(proxy, "/contacts")) == 1
    assert sleeps == []
    # The service did act: the caller finds the contact instead of creating it twice.
    assert [c.email for c in client.contacts.list(email="lin@example.com")] == ["lin@example.com"]


def test_a_server_that_cannot_be_reached_fails_after_the_bounded_retries(sleeps):
    from tests.support.ports import free_port

    client = Client(api_key="ak_live_x", base_url=f"http://127.0.0.1:{free_port()}", max_retries=2)

    with pytest.raises(APIConnectionError):
        client.plans.list().__next__()

    assert len(sleeps) == 2


def test_the_other_methods_reach_their_endpoints(service_url, sdk_key, sdk_account, smtp_sink):
    sink = smtp_sink()
    client = Client(api_key=sdk_key, base_url=service_url)

    key = client.api_keys.create(label="ci", client_kind="sdk")
    assert key.plaintext.startswith("ak_live_") and key.client_kind == "sdk"
    assert {k.label for k in client.api_keys.list()} == {"sdk", "ci"}
    client.api_keys.revoke(key.id)
    assert {k.status for k in client.api_keys.list() if k.id == key.id} == {"revoked"}
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_hobby")
    assert [(p.slug, p.psp_price_id) for p in client.plans.list()] == [("hobby", "price_hobby")]
    assert client.billing.subscription().plan["slug"] == "free"
    with pytest.raises(errors.NoPspCustomer):
        client.billing.portal()

    webhook = client.webhooks.create(url="http://127.0.0.1:9/hook")
    assert webhook.secret.startswith("whsec_")
    assert client.webhooks.retrieve(webhook.id).secret is None
    disabled = client.webhooks.update(webhook.id, disabled_at="2026-01-01T00:00:00Z")
    assert disabled.disabled_at is not None
    assert client.webhooks.update(webhook.id, disabled_at=None).disabled_at is None
    client.webhooks.delete(webhook.id)
    with pytest.raises(errors.WebhookNotFound):
        client.webhooks.retrieve(webhook.id)

    mailbox = mailbox_create(client, sink)
    assert client.mailboxes.update(mailbox.id, daily_limit=10).daily_limit == 10
    assert client.mailboxes.retrieve(mailbox.id).smtp_password_set is True
    assert client.mailboxes.verify(mailbox.id).smtp["ok"] is True
    client.mailboxes.delete(mailbox.id)
    with pytest.raises(errors.CredentialNotFound):
        client.mailboxes.retrieve(mailbox.id)

    contact = client.contacts.create(email="lin@example.com", fields={"team": "ops"})
    contact = client.contacts.update(contact.id, first_name="Lin")
    assert (contact.first_name, contact.fields) == ("Lin", {"team": "ops"})
    assert client.contacts.retrieve(contact.id).email == "lin@example.com"
    assert list(client.contacts.list(unsubscribed=True)) == []
    client.contacts.delete(contact.id)
    with pytest.raises(errors.ContactNotFound):
        client.contacts.retrieve(contact.id)

    imported = client.contact_imports.create(contacts=[{"email": "sam@example.com"}])
    assert [i.id for i in client.contact_imports.list()] == [imported.id]
    assert client.contact_imports.retrieve(imported.id).created_count == 1

    campaign = client.campaigns.create(name="Q4", steps=STEPS)
    assert [c.id for c in client.campaigns.list()] == [campaign.id]
    client.campaigns.delete(campaign.id)
    assert list(client.campaigns.list()) == []
