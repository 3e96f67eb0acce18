"""The MCP server as an agent's host runs it: the `outreach-mcp` console script over
stdio (and Streamable HTTP), driven by the official MCP client, against the live
service. Every effect is checked through the API, and the server's traffic is counted
as client_kind mcp."""

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from outreach_sdk import Client, errors

from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.outreach.factories import CampaignFactory
from tests.support.ports import free_port, wait_for_port

pytestmark = [pytest.mark.e2e]

SCRIPT = str(Path(sys.executable).with_name("outreach-mcp"))
STEPS = [{"subject": "Hello {{first_name|there}}", "body_text": "Hi.", "delay_minutes": 0}]
CSV = "email,first_name,company\nlin@example.com,Lin,Acme\nsam@example.com,Sam,Acme\n"


def _result(answer):
    """A tool's answer: its structured content (a list comes wrapped in `result`)."""
    assert not answer.is_error, answer.content[0].text
    content = answer.structured_content
    return content["result"] if set(content) == {"result"} else content


def _error(answer) -> str:
    """A tool error's text: `<code>: <message>`, as docs/clients.md shows it."""
    assert answer.is_error
    text = answer.content[0].text
    assert not text.startswith("Error executing tool"), text
    return text


async def _session(env: dict, work):
    params = StdioServerParameters(command=SCRIPT, env=env)
    async with McpClient(params, read_timeout_seconds=60) as mcp:
        return await work(mcp)


def test_an_agent_runs_a_campaign_through_the_tools(service_url, sdk_key, sdk_account, smtp_sink):
    api = Client(api_key=sdk_key, base_url=service_url)
    mailbox_id = mailbox_create(api, smtp_sink()).id
    webhook = api.webhooks.create(url="http://127.0.0.1:9/hook")
    mcp_key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    others = CampaignFactory(account=AccountFactory())
    env = {"OUTREACH_API_KEY": mcp_key, "OUTREACH_BASE_URL": service_url}
    assert api.billing.usage().by_client_kind["mcp"] == 0

    async def work(mcp):
        tools = {tool.name: tool for tool in (await mcp.list_tools()).tools}
        call = mcp.call_tool
        seen = {"tools": tools}
        campaign = _result(
            await call(
                "create_campaign",
                {"name": "Q4", "steps": STEPS, "credential_ids": [mailbox_id]},
            )
        )
        seen["campaign"] = campaign
        cid = campaign["id"]
        _result(await call("update_campaign", {"campaign_id": cid, "name": "Q4 launch"}))
        seen["import"] = _result(
            await call("import_contacts_csv", {"csv": CSV, "campaign_id": cid})
        )
        seen["contact"] = _result(await call("add_contact", {"email": "kim@example.com"}))

        preview = _result(
            await call("dispatch_campaign", {"campaign_id": cid, "all_pending": True})
        )
        seen["preview"] = preview
        seen["pending_after_preview"] = [
            e.status for e in api.campaigns.enrollments(cid, status="pending")
        ]
        forged = preview["confirmation_token"][:-4] + "AAAA"
        seen["forged"] = _error(
            await call(
                "dispatch_campaign",
                {"campaign_id": cid, "all_pending": True, "confirmation_token": forged},
            )
        )
        # One more pending contact since the preview: the old token no longer holds.
        api.contact_imports.create(contacts=[{"email": "joe@example.com"}], campaign_id=cid)
        changed = _result(
            await call(
                "dispatch_campaign",
                {
                    "campaign_id": cid,
                    "all_pending": True,
                    "confirmation_token": preview["confirmation_token"],
                },
            )
        )
        seen["changed"] = changed
        seen["dispatched"] = _result(
            await call(
                "dispatch_campaign",
                {
                    "campaign_id": cid,
                    "all_pending": True,
                    "confirmation_token": changed["confirmation_token"],
                },
            )
        )
        # A token sends once.
        seen["reused"] = _error(
            await call(
                "dispatch_campaign",
                {
                    "campaign_id": cid,
                    "all_pending": True,
                    "confirmation_token": changed["confirmation_token"],
                },
            )
        )
        outreach = {"campaign_id": cid, "email": "kim@example.com"}
        seen["outreach_preview"] = _result(await call("start_outreach", outreach))
        seen["enrolled_after_outreach_preview"] = sum(1 for _ in api.campaigns.enrollments(cid))
        seen["outreach"] = _result(
            await call(
                "start_outreach",
                outreach | {"confirmation_token": seen["outreach_preview"]["confirmation_token"]},
            )
        )
        seen["sending_status"] = _result(await call("get_sending_status", {"campaign_id": cid}))
        seen["paused"] = _result(await call("pause_campaign", {"campaign_id": cid}))
        seen["paused_via_api"] = api.campaigns.retrieve(cid).status
        seen["resumed"] = _result(await call("resume_campaign", {"campaign_id": cid}))
        seen["enrollments"] = _result(await call("list_enrollments", {"campaign_id": cid}))
        seen["stats"] = _result(await call("get_campaign_stats", {"campaign_id": cid}))
        seen["campaigns"] = _result(await call("list_campaigns", {}))
        seen["webhooks"] = _result(await call("list_webhooks", {}))
        seen["deliveries"] = _result(
            await call("list_webhook_deliveries", {"webhook_id": webhook.id})
        )
        seen["not_found"] = _error(await call("get_campaign", {"campaign_id": str(others.pk)}))
        seen["invalid"] = _error(await call("add_contact", {"email": "not an address"}))
        unknown = await call("add_contact", {"email": "x@example.com", "firstname": "X"})
        seen["unknown_argument"] = (unknown.is_error, unknown.content[0].text)
        seen["usage"] = _result(await call("get_usage", {}))
        return seen

    seen = asyncio.run(_session(env, work))
    cid = seen["campaign"]["id"]

    tools = seen["tools"]
    reads = [name for name, tool in tools.items() if tool.annotations.read_only_hint]
    assert set(reads) >= {"list_campaigns", "list_enrollments", "get_campaign_stats", "get_usage"}
    assert set(reads) >= {"list_webhooks", "list_webhook_deliveries", "list_mailboxes"}
    assert "get_sending_status" in reads
    destructive = {name for name, tool in tools.items() if tool.annotations.destructive_hint}
    assert destructive == {
        "dispatch_campaign",
        "delete_campaign",
        "pause_campaign",
        "add_to_blocklist",  # stops running sequences to the entries, for good
        "remove_from_blocklist",
    }
    schema = tools["create_campaign"].input_schema
    assert set(schema["required"]) == {"name", "steps", "credential_ids"}
    assert all(tool.input_schema["additionalProperties"] is False for tool in tools.values())
    is_error, text = seen["unknown_argument"]
    assert is_error and "firstname" in text and "Extra inputs are not permitted" in text
    assert all(tool.description for tool in tools.values())

    # Every change is visible through the API.
    campaign = api.campaigns.retrieve(cid)
    assert (campaign.name, campaign.status) == ("Q4 launch", "active")
    assert seen["import"]["status"] in ("pending", "completed")
    assert api.contacts.list(email="kim@example.com").__next__().id == seen["contact"]["id"]

    preview = seen["preview"]
    assert preview["status"] == "confirmation_required"
    assert preview["preview"]["contacts"] == 2
    assert preview["preview"]["mailboxes"][0]["from_email"] == "ada@example.com"
    assert preview["preview"]["plan_remaining_sends"] == 100
    assert preview["preview"]["first_send_at"]
    assert seen["pending_after_preview"] == ["pending", "pending"]  # nothing sent
    assert seen["forged"].startswith("invalid_confirmation_token")
    assert seen["changed"]["status"] == "confirmation_required"
    assert seen["changed"]["preview"]["contacts"] == 3
    assert (seen["dispatched"]["status"], seen["dispatched"]["dispatched"]) == ("dispatched", 3)
    assert seen["reused"].startswith("invalid_confirmation_token: ")
    assert "used already" in seen["reused"]
    outreach_preview = seen["outreach_preview"]
    assert outreach_preview["status"] == "confirmation_required"
    assert outreach_preview["preview"]["contact"]["email"] == "kim@example.com"
    assert outreach_preview["preview"]["first_send_at"]
    assert seen["enrolled_after_outreach_preview"] == 3  # nothing sent by the preview
    assert (seen["outreach"]["status"], seen["outreach"]["contact_email"]) == (
        "scheduled",
        "kim@example.com",
    )
    status = seen["sending_status"]
    assert status["campaign_id"] == cid and status["mailboxes"][0]["credential_id"] == mailbox_id
    assert status["summary"][0].startswith("ada@example.com: ")
    assert (seen["paused"]["status"], seen["paused_via_api"]) == ("paused", "paused")
    assert seen["resumed"]["status"] == "active"
    assert sorted(e["contact_email"] for e in seen["enrollments"]) == [
        "joe@example.com",
        "kim@example.com",
        "lin@example.com",
        "sam@example.com",
    ]
    assert {e.status for e in api.campaigns.enrollments(cid)} == {"scheduled"}
    assert seen["stats"]["stats"]["enrolled"] == 4
    assert [c["id"] for c in seen["campaigns"]] == [cid]
    assert [w["id"] for w in seen["webhooks"]] == [webhook.id]
    assert seen["deliveries"] == []

    assert seen["not_found"] == "campaign_not_found: No such campaign."
    assert seen["invalid"].startswith("validation_failed: ")
    assert json.loads(seen["invalid"].split(" details: ", 1)[1])["fields"].keys() == {"email"}

    # The server's API traffic is counted as mcp; the test's own as sdk.
    usage = api.billing.usage().by_client_kind
    assert usage["mcp"] >= len(seen) and usage["mcp"] == seen["usage"]["by_client_kind"]["mcp"]
    assert usage["sdk"] > 0


def test_over_streamable_http_a_token_sends_to_exactly_the_contacts_it_previewed(
    service_url, sdk_key, sdk_account, smtp_sink
):
    """Even one contact needs a confirmation; a token for two contacts does not send to
    two others, and it is spent once used."""
    api = Client(api_key=sdk_key, base_url=service_url)
    campaign = api.campaigns.create(
        name="Q4", steps=STEPS, credential_ids=[mailbox_create(api, smtp_sink()).id]
    )
    emails = ["lin@example.com", "sam@example.com", "joe@example.com", "kim@example.com"]
    api.contact_imports.create(contacts=[{"email": e} for e in emails], campaign_id=campaign.id)
    ids = {e: next(api.contacts.list(email=e)).id for e in emails}
    first_two = [ids["lin@example.com"], ids["sam@example.com"]]
    other_two = [ids["joe@example.com"], ids["kim@example.com"]]
    mcp_key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    port = free_port()
    server = subprocess.Popen(
        [SCRIPT, "--transport", "streamable-http", "--port", str(port)],
        env={"OUTREACH_API_KEY": mcp_key, "OUTREACH_BASE_URL": service_url, "PATH": "/usr/bin"},
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, timeout=30, process=server)

        async def work(mcp):
            seen = {}

            async def dispatch(contact_ids, token=None):
                arguments = {"campaign_id": campaign.id, "contact_ids": contact_ids}
                if token:
                    arguments["confirmation_token"] = token
                return await mcp.call_tool("dispatch_campaign", arguments)

            seen["one"] = _result(await dispatch([ids["lin@example.com"]]))
            preview = _result(await dispatch(first_two))
            token = preview["confirmation_token"]
            seen["preview"] = preview
            seen["other_two"] = _result(await dispatch(other_two, token))
            seen["pending_after"] = sorted(
                e.contact_email for e in api.campaigns.enrollments(campaign.id, status="pending")
            )
            seen["dispatched"] = _result(await dispatch(first_two, token))
            seen["again"] = _error(await dispatch(first_two, token))
            seen["deleted"] = _result(
                await mcp.call_tool("delete_campaign", {"campaign_id": campaign.id})
            )
            return seen

        async def over_http():
            async with McpClient(f"http://127.0.0.1:{port}/mcp") as mcp:
                return await work(mcp)

        seen = asyncio.run(over_http())
    finally:
        server.terminate()
        server.wait(timeout=15)

    assert seen["one"]["status"] == "confirmation_required"
    assert seen["one"]["preview"]["contacts"] == 1
    assert seen["preview"]["preview"]["contact_ids"] == sorted(first_two)
    # The same count, other contacts: not sent, a new preview instead.
    assert seen["other_two"]["status"] == "confirmation_required"
    assert seen["other_two"]["preview"]["contact_ids"] == sorted(other_two)
    assert seen["pending_after"] == sorted(emails)
    assert (seen["dispatched"]["status"], seen["dispatched"]["dispatched"]) == ("dispatched", 2)
    assert seen["again"].startswith("invalid_confirmation_token: ")
    assert seen["deleted"] == {"deleted": campaign.id}
    with pytest.raises(errors.CampaignNotFound):
        api.campaigns.retrieve(campaign.id)
    assert api.billing.usage().by_client_kind["mcp"] > 0


def test_it_refuses_to_start_without_an_api_key():
    done = subprocess.run([SCRIPT], env={"PATH": "/usr/bin:/bin"}, capture_output=True, text=True)
    assert done.returncode == 1
    assert "OUTREACH_API_KEY" in done.stderr
