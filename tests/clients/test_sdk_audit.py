"""The SDK's audit log (`client.audit_events.list`) and the request id on its errors,
against the live service."""

from datetime import UTC, datetime, timedelta

import pytest
import requests
from outreach_sdk import Client, errors, models

from tests.outreach.factories import CampaignFactory


@pytest.fixture
def client(service_url, sdk_key):
    # The workers' first answer includes their start: not under the SDK's 30 s timeout.
    requests.get(f"{service_url}/health", timeout=120)
    return Client(api_key=sdk_key, base_url=service_url)


def test_it_lists_the_audit_log_typed_and_filtered(client, sdk_account):
    contact = client.contacts.create(email="ada@example.org")
    client.contacts.update(contact.id, first_name="Ada")
    campaign = CampaignFactory(account=sdk_account)
    client.campaigns.update(str(campaign.pk), name="Renamed")

    events = list(client.audit_events.list())
    assert [e.action for e in events] == ["campaign.update", "contact.update", "contact.create"]
    event = events[1]
    assert isinstance(event, models.AuditEvent)
    assert isinstance(event.occurred_at, datetime)
    assert (event.resource.type, event.resource.id) == ("contact", contact.id)
    assert (event.actor.type, event.actor.client_kind) == ("api_key", "sdk")
    assert event.actor.prefix and event.changes == ["first_name"]

    only = client.audit_events.list(resource_type="contact", action="contact.update")
    assert [e.resource.id for e in only] == [contact.id]
    since = datetime.now(UTC) + timedelta(minutes=5)
    assert list(client.audit_events.list(since=since)) == []
    assert len(list(client.audit_events.list(since=since - timedelta(hours=1), limit=1))) == 3


def test_an_error_carries_the_request_id(client):
    with pytest.raises(errors.ValidationFailed) as caught:
        list(client.audit_events.list(api_key_id="not-a-uuid"))
    assert caught.value.details["fields"] == {"api_key_id": ["Must be a valid UUID."]}
    assert caught.value.request_id and len(caught.value.request_id) == 36
