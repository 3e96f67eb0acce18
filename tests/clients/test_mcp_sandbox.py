"""The sandbox tools of the MCP server, driven by the official MCP client over stdio
against the live service: the tools to make a simulator mailbox and to move a simulated
campaign's clock, as an agent sees them, and a dispatch's preview that names the
simulator mailboxes, so an agent and its user know nothing leaves before they confirm."""

import asyncio
import os

import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from accounts.services import api_key_create
from outreach.models.campaigns import Campaign
from outreach.models.sending import Enrollment
from tests.clients.test_mcp_server import SCRIPT, _error, _result
from tests.clients.test_sdk_sandbox import serves_sandbox_endpoints
from tests.intake.simulator import simulator_credential
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def mcp_env(service_url, sdk_account) -> dict:
    key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    env = {"OUTREACH_API_KEY": key, "OUTREACH_BASE_URL": service_url}
    # The server runs the packages under test, wherever the test process imports them from.
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    return env


def _run(env: dict, work):
    async def session():
        params = StdioServerParameters(command=SCRIPT, env=env)
        async with McpClient(params, read_timeout_seconds=60) as mcp:
            return await work(mcp)

    return asyncio.run(session())


def simulated_campaign(account) -> Campaign:
    """A draft campaign of one simulator mailbox, two contacts at simulator.test pending."""
    campaign = CampaignFactory(account=account, with_credential=False)
    campaign.credentials.add(simulator_credential(account, from_email="sam@sandbox.example"))
    for name in ("ada+reply", "lin+open"):
        contact = ContactFactory(account=account, email=f"{name}@simulator.test")
        EnrollmentFactory(campaign=campaign, contact=contact)
    return campaign


def test_the_sandbox_tools_as_an_agent_sees_them(mcp_env):
    async def work(mcp):
        return {tool.name: tool for tool in (await mcp.list_tools()).tools}

    tools = _run(mcp_env, work)
    make = tools["create_simulator_mailbox"]
    assert "never connects" in make.description and "+reply" in make.description
    assert make.annotations.destructive_hint is False
    assert make.input_schema["required"] == ["from_email"]
    assert make.input_schema["additionalProperties"] is False
    clock = tools["advance_campaign_clock"]
    assert clock.input_schema["properties"]["minutes"]["minimum"] == 1
    assert clock.input_schema["properties"]["minutes"]["maximum"] == 527_040
    assert "campaign_not_simulated" in clock.description
    assert "confirmation_token" not in clock.input_schema["properties"]


def test_a_dispatch_preview_names_the_simulator_mailboxes(mcp_env, sdk_account):
    campaign = simulated_campaign(sdk_account)

    async def work(mcp):
        answer = await mcp.call_tool(
            "dispatch_campaign", {"campaign_id": str(campaign.pk), "all_pending": True}
        )
        return _result(answer)

    preview = _run(mcp_env, work)
    assert preview["status"] == "confirmation_required"
    shown = preview["preview"]
    assert shown["simulator_mailboxes"] == ["sam@sandbox.example"]
    assert shown["nothing_leaves"] is True
    assert [m["simulator"] for m in shown["mailboxes"]] == [True]
    assert "no email leaves the service" in shown["note"]
    assert "sam@sandbox.example" in shown["note"]
    # A preview sends nothing.
    assert set(Enrollment.objects.values_list("status", flat=True)) == {"pending"}


def test_the_clock_takes_minutes_within_the_contracts_bounds(mcp_env, sdk_account):
    campaign = simulated_campaign(sdk_account)

    async def work(mcp):
        return [
            await mcp.call_tool(
                "advance_campaign_clock", {"campaign_id": str(campaign.pk), "minutes": minutes}
            )
            for minutes in (0, 527_041)
        ]

    assert all(answer.is_error for answer in _run(mcp_env, work))  # refused before any call


@serves_sandbox_endpoints
def test_an_agent_makes_a_simulator_and_moves_its_campaigns_clock(mcp_env, sdk_account):
    real = CampaignFactory(account=sdk_account)

    async def make(mcp):
        return _result(
            await mcp.call_tool("create_simulator_mailbox", {"from_email": "sam@sandbox.example"})
        )

    made = _run(mcp_env, make)
    assert made["auth_method"] == "simulator"
    campaign = CampaignFactory(account=sdk_account, with_credential=False)
    campaign.credentials.add(made["id"])

    async def move(mcp):
        moved = _result(
            await mcp.call_tool(
                "advance_campaign_clock", {"campaign_id": str(campaign.pk), "minutes": 1440}
            )
        )
        refused = _error(
            await mcp.call_tool(
                "advance_campaign_clock", {"campaign_id": str(real.pk), "minutes": 60}
            )
        )
        return moved, refused

    moved, refused = _run(mcp_env, move)
    assert moved["moved"] == 0  # a draft: nothing waits
    assert refused.startswith("campaign_not_simulated: ")
