"""The MCP server's audit log tool, driven by the official MCP client over stdio against
the live service: what the agent's key changed, named by action and fields."""

import pytest
import requests
from outreach_sdk import Client

from accounts.services import api_key_create
from tests.clients.test_mcp_sandbox import _run
from tests.clients.test_mcp_server import _error, _result

pytestmark = [pytest.mark.e2e]


def test_an_agent_reads_the_audit_log(service_url, sdk_key, sdk_account):
    # The workers' first answer includes their start: not under the SDK's 30 s timeout.
    requests.get(f"{service_url}/health", timeout=120)
    api = Client(api_key=sdk_key, base_url=service_url)
    contact = api.contacts.create(email="ada@example.org")
    issued = api_key_create(account=sdk_account, label="agent", client_kind="mcp")
    env = {"OUTREACH_API_KEY": issued.plaintext, "OUTREACH_BASE_URL": service_url}

    async def work(mcp):
        added = _result(await mcp.call_tool("add_contact", {"email": "kim@example.com"}))
        mine = _result(
            await mcp.call_tool("list_audit_events", {"api_key_id": str(issued.api_key.pk)})
        )
        every = _result(await mcp.call_tool("list_audit_events", {"limit": 5}))
        bad = _error(await mcp.call_tool("list_audit_events", {"since": "yesterday"}))
        return added, mine, every, bad

    added, mine, every, bad = _run(env, work)
    assert [(e["action"], e["resource"]["id"]) for e in mine] == [("contact.create", added["id"])]
    assert mine[0]["actor"]["client_kind"] == "mcp"
    # The tool sends every field of a contact (empty where not given): the row names
    # what the request set, never a value.
    assert mine[0]["changes"] == ["company", "email", "fields", "first_name", "last_name"]
    assert [e["resource"]["id"] for e in every] == [added["id"], contact.id]
    assert "since" in bad
