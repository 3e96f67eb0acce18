"""Roles, limits and approvals through the clients, against the live service: the SDK
creates keys with a role, a limit and an expiry, raises the new errors by class, and
returns an Approval for a drafter's send; the MCP server with a drafter key asks for an
approval instead of a confirmation (nothing is sent), and lists the pending ones."""

import asyncio
import os
from datetime import UTC, datetime, timedelta

import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from outreach_sdk import Client, InsufficientRole
from outreach_sdk.approvals import Approval

from accounts.services import api_key_create
from outreach.models.approvals import Approval as ApprovalRow
from outreach.models.sending import Enrollment
from tests.clients.test_mcp_server import SCRIPT, _result
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def campaign_of(service_url, sdk_key, sdk_account):
    """A campaign of the account with a mailbox and two pending contacts."""
    api = Client(api_key=sdk_key, base_url=service_url, timeout=120)
    campaign = CampaignFactory(account=sdk_account)
    for n in range(2):
        contact = ContactFactory(account=sdk_account, email=f"p{n}@example.org")
        EnrollmentFactory(campaign=campaign, contact=contact)
    return api, api.campaigns.retrieve(str(campaign.pk))


def test_the_sdk_makes_keys_with_roles_and_decides_approvals(campaign_of, service_url):
    api, campaign = campaign_of
    until = datetime.now(UTC) + timedelta(days=7)
    agent = api.api_keys.create(
        label="agent", role="drafter", daily_send_limit=10, expires_at=until
    )
    assert (agent.role, agent.daily_send_limit) == ("drafter", 10)
    assert agent.expires_at is not None and abs(agent.expires_at - until) < timedelta(seconds=1)
    drafter = Client(api_key=agent.plaintext, base_url=service_url, timeout=120)

    held = drafter.campaigns.dispatch(campaign.id, all_pending=True)
    assert isinstance(held, Approval)
    assert (held.action, held.status, held.requested_by.prefix) == (
        "dispatch",
        "pending",
        agent.prefix,
    )
    with pytest.raises(InsufficientRole) as refused:
        drafter.approvals.approve(held.id)
    assert refused.value.details == {"role": "drafter", "required": "sender"}
    assert [a.id for a in api.approvals.list(status="pending")] == [held.id]

    approved = api.approvals.approve(held.id)
    assert (approved.status, approved.outcome) == ("approved", {"dispatched": 2})
    assert approved.decided_by is not None
    assert Enrollment.objects.filter(status="scheduled").count() == 2


def test_with_a_drafter_key_the_mcp_server_asks_for_an_approval(campaign_of, sdk_account):
    api, campaign = campaign_of
    key = api_key_create(account=sdk_account, label="agent", client_kind="mcp", role="drafter")
    env = {"OUTREACH_API_KEY": key.plaintext, "OUTREACH_BASE_URL": api._transport.base_url}
    # The server process imports the clients from where this run does.
    env |= {"PYTHONPATH": os.environ["PYTHONPATH"]} if "PYTHONPATH" in os.environ else {}

    async def work():
        params = StdioServerParameters(command=SCRIPT, env=env)
        async with McpClient(params, read_timeout_seconds=60) as mcp:
            held = _result(
                await mcp.call_tool(
                    "dispatch_campaign", {"campaign_id": campaign.id, "all_pending": True}
                )
            )
            listed = _result(await mcp.call_tool("list_approvals", {}))
            return held, listed

    held, listed = asyncio.run(work())
    assert held["status"] == "approval_requested"
    assert "confirmation_token" not in held
    assert held["approval"]["status"] == "pending"
    assert sorted(held["approval"]["contact_ids"]) == sorted(held["preview"]["contact_ids"])
    assert [a["id"] for a in listed] == [held["approval"]["id"]]
    assert ApprovalRow.objects.get().requested_by_id == key.api_key.pk
    assert Enrollment.objects.filter(status="pending").count() == 2
