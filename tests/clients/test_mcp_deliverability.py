"""The deliverability tools of the MCP server, driven by the official MCP client over stdio
against the live service (which asks a real DNS server on loopback): the blocklist (add
one or many, list, remove by id or by value), the sending defaults, a mailbox's sender
domain check in plain words, and click tracking on the campaign tools. Every effect is
read back through the API."""

import asyncio

import pytest
import requests
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from outreach_sdk import Client

from accounts.services import api_key_create
from outreach.campaigns import clicks
from outreach.models.blocklist import BlocklistEntry
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.clients.test_mcp_server import SCRIPT, STEPS, _error, _result
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CredentialFactory

pytestmark = [pytest.mark.e2e]


@pytest.fixture
def service(service_server, dns_server, sdk_key, sdk_account):
    """The service asking the test's DNS server; the API through the SDK, and the MCP
    server's environment (a key of client_kind mcp)."""
    url = service_server(DNS_RESOLVERS=dns_server.address, DNS_TIMEOUT_SECONDS="0.5")
    key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    return {
        "url": url,
        "api": Client(api_key=sdk_key, base_url=url),
        "env": {"OUTREACH_API_KEY": key, "OUTREACH_BASE_URL": url},
    }


def _run(env: dict, work):
    async def session():
        params = StdioServerParameters(command=SCRIPT, env=env)
        async with McpClient(params, read_timeout_seconds=60) as mcp:
            return await work(mcp.call_tool, mcp)

    return asyncio.run(session())


def test_an_agent_keeps_the_blocklist(service, sdk_account, smtp_sink):
    api = service["api"]
    campaign = api.campaigns.create(
        name="Q4", steps=STEPS, credential_ids=[mailbox_create(api, smtp_sink()).id]
    )
    theirs = BlocklistEntry.objects.create(
        account=AccountFactory(), value="theirs.example", kind="domain"
    )

    async def work(call, mcp):
        seen = {"tools": {tool.name: tool for tool in (await mcp.list_tools()).tools}}
        seen["many"] = _result(
            await call(
                "add_to_blocklist",
                {
                    "entries": ["Ada@Example.org", "competitor.example", "ada@example.org", "x"],
                    "reason": "asked us",
                },
            )
        )
        seen["one"] = _result(await call("add_to_blocklist", {"entries": ["sam@example.net"]}))
        seen["again"] = _result(await call("add_to_blocklist", {"entries": ["sam@example.net"]}))
        seen["empty"] = await call("add_to_blocklist", {"entries": []})
        seen["all"] = _result(await call("list_blocklist", {}))
        seen["domains"] = _result(await call("list_blocklist", {"kind": "domain"}))
        seen["found"] = _result(await call("list_blocklist", {"value": "ADA@example.org"}))
        seen["bad_kind"] = await call("list_blocklist", {"kind": "company"})
        # start_outreach to a blocked address: the preview, then the service refuses.
        outreach = {"campaign_id": campaign.id, "email": "joe@eu.competitor.example"}
        preview = _result(await call("start_outreach", outreach))
        seen["blocked_outreach"] = _error(
            await call(
                "start_outreach", outreach | {"confirmation_token": preview["confirmation_token"]}
            )
        )
        seen["by_value"] = _result(
            await call("remove_from_blocklist", {"value": "Competitor.example"})
        )
        seen["by_id"] = _result(
            await call("remove_from_blocklist", {"entry_id": seen["found"][0]["id"]})
        )
        seen["gone_value"] = _error(
            await call("remove_from_blocklist", {"value": "competitor.example"})
        )
        seen["gone_id"] = _error(
            await call("remove_from_blocklist", {"entry_id": seen["found"][0]["id"]})
        )
        seen["theirs"] = _error(await call("remove_from_blocklist", {"entry_id": str(theirs.pk)}))
        seen["neither"] = _error(await call("remove_from_blocklist", {}))
        seen["both"] = _error(
            await call("remove_from_blocklist", {"entry_id": str(theirs.pk), "value": "x.example"})
        )
        return seen

    seen = _run(service["env"], work)

    tools = seen["tools"]
    assert tools["list_blocklist"].annotations.read_only_hint is True
    for name in ("add_to_blocklist", "remove_from_blocklist"):
        annotations = tools[name].annotations
        assert (annotations.read_only_hint, annotations.destructive_hint) == (False, True)
        assert "confirmation_token" not in tools[name].input_schema["properties"]
    assert tools["add_to_blocklist"].input_schema["properties"]["entries"]["maxItems"] == 10_000

    many = seen["many"]
    assert (many["added"], many["existing"]) == (2, 1)
    assert [item["value"] for item in many["invalid"]] == ["x"]
    assert many["summary"] == (
        "2 entries added; 1 already on the blocklist; 1 not an address or a domain (see invalid)."
    )
    assert "does not restart it" in many["note"]
    assert seen["one"]["summary"] == "1 entry added."
    assert seen["again"]["summary"] == "0 entries added; 1 already on the blocklist."
    assert seen["empty"].is_error  # refused by the input schema (at least one entry)
    assert {e["value"] for e in seen["all"]} == {
        "sam@example.net",
        "competitor.example",
        "ada@example.org",
    }
    assert [e["value"] for e in seen["domains"]] == ["competitor.example"]
    [found] = seen["found"]
    assert (found["value"], found["kind"], found["reason"]) == (
        "ada@example.org",
        "email",
        "asked us",
    )
    assert seen["bad_kind"].is_error
    assert seen["blocked_outreach"].startswith("contact_blocked: ")
    assert '"entry": "competitor.example"' in seen["blocked_outreach"]

    assert seen["by_value"]["removed"]["value"] == "competitor.example"
    assert "stay stopped" in seen["by_value"]["note"]
    assert seen["by_id"]["removed"] == {"id": found["id"]}
    assert seen["gone_value"] == (
        "blocklist_entry_not_found: No blocklist entry for 'competitor.example'."
    )
    assert seen["gone_id"] == "blocklist_entry_not_found: No such blocklist entry."
    assert seen["theirs"] == "blocklist_entry_not_found: No such blocklist entry."
    assert seen["neither"] == seen["both"] == "validation_failed: Give entry_id or value."
    assert [e.value for e in api.blocklist.list()] == ["sam@example.net"]
    assert BlocklistEntry.objects.filter(pk=theirs.pk).exists()
    assert list(api.campaigns.enrollments(campaign.id)) == []


def test_an_agent_reads_and_sets_the_sending_defaults(service, sdk_account):
    async def work(call, mcp):
        seen = {"tools": {tool.name: tool for tool in (await mcp.list_tools()).tools}}
        seen["before"] = _result(await call("get_sending_defaults", {}))
        seen["set"] = _result(
            await call("set_sending_defaults", {"max_per_recipient_domain_per_day": 3})
        )
        seen["zero"] = await call("set_sending_defaults", {"max_per_recipient_domain_per_day": 0})
        seen["missing"] = await call("set_sending_defaults", {})
        seen["after_refusals"] = _result(await call("get_sending_defaults", {}))
        seen["cleared"] = _result(
            await call("set_sending_defaults", {"max_per_recipient_domain_per_day": None})
        )
        return seen

    seen = _run(service["env"], work)

    assert seen["tools"]["get_sending_defaults"].annotations.read_only_hint is True
    annotations = seen["tools"]["set_sending_defaults"].annotations
    assert (annotations.destructive_hint, annotations.idempotent_hint) == (False, True)
    assert seen["before"] == {"max_per_recipient_domain_per_day": None}
    assert seen["set"] == {"max_per_recipient_domain_per_day": 3}
    assert seen["zero"].is_error and seen["missing"].is_error
    assert seen["after_refusals"] == {"max_per_recipient_domain_per_day": 3}
    assert seen["cleared"] == {"max_per_recipient_domain_per_day": None}
    sdk_account.refresh_from_db()
    assert sdk_account.max_per_recipient_domain_per_day is None


def test_an_agent_checks_a_mailboxs_sender_domain(service, dns_server, smtp_sink):
    api = service["api"]
    dns_server.add("example.com", "TXT", "v=spf1 mx -all")
    dns_server.add("example.com", "MX", "10 mx.example.com.")
    dns_server.add("_dmarc.example.com", "TXT", "v=DMARC1; p=none")
    dns_server.add("s1._domainkey.example.com", "TXT", "v=DKIM1; k=rsa; p=MIGf")
    dns_server.add("example.net", "TXT", "v=spf1 mx -all")
    dns_server.add("example.net", "MX", "10 mx.example.net.")
    dns_server.add("_dmarc.example.net", "TXT", "v=DMARC1; p=reject")
    dns_server.add("google._domainkey.example.net", "TXT", "v=DKIM1; k=rsa; p=MIGf")
    sink = smtp_sink()
    mailbox = mailbox_create(api, sink)  # ada@example.com
    other = api.mailboxes.create(
        from_email="lin@example.net",
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        smtp_username="lin",
        smtp_password="secret",
    )
    theirs = CredentialFactory()

    async def work(call, mcp):
        seen = {"tools": {tool.name: tool for tool in (await mcp.list_tools()).tools}}
        seen["pending"] = _result(await call("get_sender_domain_check", {"mailbox_id": mailbox.id}))
        seen["checked"] = _result(await call("check_sender_domain", {"mailbox_id": mailbox.id}))
        seen["selector"] = _result(
            await call("check_sender_domain", {"mailbox_id": mailbox.id, "dkim_selectors": ["s1"]})
        )
        seen["clean"] = _result(await call("check_sender_domain", {"mailbox_id": other.id}))
        seen["every"] = _result(await call("get_sender_domain_check", {}))
        seen["theirs"] = _error(await call("check_sender_domain", {"mailbox_id": str(theirs.pk)}))
        seen["bad_selector"] = _error(
            await call("check_sender_domain", {"mailbox_id": mailbox.id, "dkim_selectors": ["a b"]})
        )
        return seen

    seen = _run(service["env"], work)

    tools = seen["tools"]
    assert tools["get_sender_domain_check"].annotations.read_only_hint is True
    check_tool = tools["check_sender_domain"].annotations
    assert (check_tool.read_only_hint, check_tool.destructive_hint) == (False, False)
    assert check_tool.open_world_hint is True

    [pending] = seen["pending"]
    assert pending["status"] == "pending"
    assert pending["summary"] == [
        "ada@example.com sends as example.com: not checked yet. Run check_sender_domain to "
        "check it now."
    ]
    checked = seen["checked"]
    assert checked["status"] == "error"
    summary = checked["summary"]
    assert summary[0].startswith("ada@example.com sends as example.com: 1 error, 1 warning (")
    assert summary[1].startswith("Error (dkim_not_found): No DKIM key found for example.com")
    assert summary[2].startswith("Warning (dmarc_policy_none): ")
    assert summary[-1].startswith("Gmail, Yahoo and Outlook.com refuse")
    selector = seen["selector"]
    assert (selector["status"], selector["dkim_selectors"]) == ("warning", ["s1"])
    assert selector["summary"][0].startswith("ada@example.com sends as example.com: 1 warning (")
    assert (
        selector["summary"][-1] == "Only warnings: nothing holds sends, but consider fixing them."
    )
    clean = seen["clean"]
    assert clean["status"] == "pass"
    assert clean["summary"][0].startswith("lin@example.net sends as example.net: passes (checked ")
    assert clean["summary"][0].endswith("SPF, DKIM, DMARC and MX are in order.")
    every = {item["credential_id"]: item["status"] for item in seen["every"]}
    assert every == {mailbox.id: "warning", other.id: "pass"}
    assert seen["theirs"] == "credential_not_found: No such SMTP credential."
    assert seen["bad_selector"].startswith("validation_failed: ")
    assert api.mailboxes.domain_check(mailbox.id).dkim_selectors == ["s1"]


def test_campaign_tools_track_clicks_and_the_stats_show_them(service, sdk_account, smtp_sink):
    api = service["api"]
    mailbox_id = mailbox_create(api, smtp_sink()).id
    enrollment = sent_enrollment(account=sdk_account)
    token = clicks.click_token_make(
        enrollment_id=enrollment.pk, step=1, variant="A", url="https://acme.example/pricing"
    )
    requests.get(f"{service['url']}/t/c/{token}", allow_redirects=False, timeout=10)

    async def work(call, mcp):
        seen = {}
        created = _result(
            await call(
                "create_campaign",
                {
                    "name": "Clicks",
                    "steps": STEPS,
                    "credential_ids": [mailbox_id],
                    "track_clicks": True,
                    "require_authenticated_domain": True,
                    "max_per_recipient_domain_per_day": 5,
                },
            )
        )
        seen["created"] = created
        seen["plain"] = _result(
            await call(
                "create_campaign",
                {"name": "Plain", "steps": STEPS, "credential_ids": [mailbox_id]},
            )
        )
        update = {"campaign_id": created["id"]}
        seen["updated"] = _result(
            await call("update_campaign", update | {"track_clicks": False, "name": "Renamed"})
        )
        seen["default_cap"] = _result(
            await call("update_campaign", update | {"use_account_domain_cap": True})
        )
        seen["own_cap"] = _result(
            await call("update_campaign", update | {"max_per_recipient_domain_per_day": 9})
        )
        seen["both"] = _error(
            await call(
                "update_campaign",
                update | {"max_per_recipient_domain_per_day": 9, "use_account_domain_cap": True},
            )
        )
        seen["stats"] = _result(
            await call("get_campaign_stats", {"campaign_id": str(enrollment.campaign_id)})
        )
        return seen

    seen = _run(service["env"], work)

    created = seen["created"]
    assert (created["track_clicks"], created["require_authenticated_domain"]) == (True, True)
    assert created["max_per_recipient_domain_per_day"] == 5
    plain = seen["plain"]
    assert (plain["track_clicks"], plain["require_authenticated_domain"]) == (False, False)
    assert plain["max_per_recipient_domain_per_day"] is None
    updated = seen["updated"]
    assert (updated["track_clicks"], updated["name"]) == (False, "Renamed")
    assert updated["require_authenticated_domain"] is True  # what was not given stays
    assert updated["max_per_recipient_domain_per_day"] == 5
    assert seen["default_cap"]["max_per_recipient_domain_per_day"] is None
    assert seen["own_cap"]["max_per_recipient_domain_per_day"] == 9
    assert seen["both"].startswith("validation_failed: Give max_per_recipient_domain_per_day")
    campaign = api.campaigns.retrieve(created["id"])
    assert (campaign.track_clicks, campaign.max_per_recipient_domain_per_day) == (False, 9)
    stats = seen["stats"]
    assert stats["stats"]["clicked"] == 1
    [variant] = [v for v in stats["steps"][0]["variants"] if v["variant"] == "A"]
    assert variant["clicked"] == 1
