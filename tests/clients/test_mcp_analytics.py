"""The MCP server's `get_analytics`, driven by the official MCP client over stdio
against the live service: the series an agent reads, its filters, and a refusal as the
envelope's code."""

import asyncio
import os
from datetime import datetime

import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters

from accounts.services import api_key_create
from outreach.analytics import Hit, hits_add
from tests.accounts.factories import AccountFactory
from tests.clients.test_mcp_server import SCRIPT, _error, _result
from tests.intake.factories import sent_enrollment

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def mcp_env(service_url, sdk_account) -> dict:
    key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    # The server runs the packages of this checkout, as the test does.
    path = os.environ.get("PYTHONPATH", "")
    return {"OUTREACH_API_KEY": key, "OUTREACH_BASE_URL": service_url, "PYTHONPATH": path}


def _run(env: dict, work):
    async def session():
        params = StdioServerParameters(command=SCRIPT, env=env)
        async with McpClient(params, read_timeout_seconds=60) as mcp:
            return await work(mcp.call_tool, mcp)

    return asyncio.run(session())


def test_an_agent_reads_the_counters_over_time(mcp_env, sdk_account):
    enrollment = sent_enrollment(account=sdk_account)
    at = datetime.fromisoformat("2026-03-03T09:00+00:00")
    hits_add([Hit("sent", enrollment.pk, at), Hit("opened", enrollment.pk, at)])
    theirs = sent_enrollment(account=AccountFactory())
    campaign_id = str(enrollment.campaign_id)

    async def work(call, mcp):
        seen = {"tools": {tool.name: tool for tool in (await mcp.list_tools()).tools}}
        seen["days"] = _result(
            await call("get_analytics", {"from_date": "2026-03-01", "to_date": "2026-03-03"})
        )
        seen["month"] = _result(
            await call(
                "get_analytics",
                {
                    "from_date": "2026-03-01",
                    "to_date": "2026-03-31",
                    "interval": "month",
                    "timezone": "Asia/Tokyo",
                    "campaign_id": campaign_id,
                    "mailbox_id": None,
                },
            )
        )
        seen["theirs"] = await call("get_analytics", {"campaign_id": str(theirs.campaign_id)})
        seen["bad"] = await call("get_analytics", {"from_date": "March"})
        seen["unknown"] = await call("get_analytics", {"form_date": "2026-03-01"})
        return seen

    seen = _run(mcp_env, work)
    assert seen["tools"]["get_analytics"].annotations.read_only_hint is True
    days = seen["days"]
    assert [(row["date"], row["sent"], row["opened"]) for row in days["series"]] == [
        ("2026-03-01", 0, 0),
        ("2026-03-02", 0, 0),
        ("2026-03-03", 1, 1),
    ]
    assert days["totals"]["bounced"] == {"hard": 0, "soft": 0, "block": 0}
    assert [(row["date"], row["sent"]) for row in seen["month"]["series"]] == [("2026-03-01", 1)]
    assert _error(seen["theirs"]).startswith("campaign_not_found:")
    assert _error(seen["bad"]).startswith("validation_failed:")
    assert seen["unknown"].is_error  # a closed argument list: nothing is guessed
