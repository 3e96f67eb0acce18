"""The MCP server and sequences that react: it explains a campaign's graph in words, and
an edit of the steps that moves people is previewed and needs a confirmation, as a
dispatch does; one that moves no one is made at once."""

import asyncio
import json
import os

import pytest
from outreach_sdk import Client

from accounts.services import api_key_create
from outreach.models.campaigns import Campaign
from tests.clients.test_mcp_server import _error, _result, _session
from tests.outreach.factories import EnrollmentFactory

pytestmark = [pytest.mark.e2e]

STEPS = [
    {"key": "intro", "subject": "Quick question", "body_text": "Hi."},
    {
        "key": "opened_intro",
        "branch": {"on": "opened", "within_minutes": 4320},
        "then": "pricing",
        "else": "bump",
    },
    {"key": "pricing", "body_text": "Our pricing.", "delay_minutes": 60, "next": "end"},
    {"key": "bump", "body_text": "Bumping this up.", "delay_minutes": 1440},
]


def _waiting_at_the_branch(campaign_id):
    EnrollmentFactory(
        campaign=Campaign.objects.get(pk=campaign_id),
        status="sent",
        current_key="opened_intro",
        path=["intro"],
    )


def test_an_agent_reads_a_graph_in_words_and_confirms_an_edit_that_moves_people(
    service_url, sdk_key, sdk_account
):
    api = Client(api_key=sdk_key, base_url=service_url)
    mcp_key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    env = {"OUTREACH_API_KEY": mcp_key, "OUTREACH_BASE_URL": service_url}
    # The server of this checkout, where a shared environment installs another one.
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    edit = [{**STEPS[0], "next": "bump"}, STEPS[3]]

    async def work(mcp):
        call, seen = mcp.call_tool, {}
        campaign = _result(
            await call("create_campaign", {"name": "R", "steps": STEPS, "credential_ids": []})
        )
        cid = seen["cid"] = campaign["id"]
        seen["words"] = _result(await call("describe_sequence", {"campaign_id": cid}))
        # No one on the way yet: made at once.
        renamed = [{**STEPS[0]}, *STEPS[1:3], {**STEPS[3], "body_text": "Bump."}]
        seen["at_once"] = _result(
            await call("update_campaign", {"campaign_id": cid, "steps": renamed})
        )
        await asyncio.to_thread(_waiting_at_the_branch, cid)
        args = {"campaign_id": cid, "steps": edit}
        seen["preview"] = _result(await call("update_campaign", args))
        seen["keys_after_preview"] = [s["key"] for s in api.campaigns.retrieve(cid).steps]
        seen["invalid"] = _error(
            await call(
                "update_campaign", {"campaign_id": cid, "steps": [{**STEPS[0], "next": "x"}]}
            )
        )
        token = seen["preview"]["confirmation_token"]
        seen["done"] = _result(await call("update_campaign", {**args, "confirmation_token": token}))
        seen["reused"] = _error(
            await call("update_campaign", {**args, "confirmation_token": token})
        )
        return seen

    seen = asyncio.run(_session(env, work))
    words = seen["words"]["sequence_in_words"]
    assert words[1] == (
        "After intro, wait up to 3 days (opened_intro): if they open intro, send pricing "
        "(1 hour later); otherwise send bump (1 day later)."
    )
    assert seen["at_once"]["steps"][3]["body_text"] == "Bump."
    preview = seen["preview"]
    assert preview["status"] == "confirmation_required"
    assert preview["preview"]["moves"] == [
        {"from_key": "opened_intro", "to_key": "bump", "enrollments": 1}
    ]
    assert preview["preview"]["moves_in_words"] == [
        "1 enrollment at opened_intro would go to bump."
    ]
    assert seen["keys_after_preview"] == ["intro", "opened_intro", "pricing", "bump"]
    assert seen["invalid"].startswith("validation_failed: ")
    assert json.loads(seen["invalid"].split(" details: ", 1)[1])["fields"].keys() == {
        "steps.0.next"
    }
    assert [s["key"] for s in seen["done"]["steps"]] == ["intro", "bump"]
    assert seen["reused"].startswith("invalid_confirmation_token: ")
    [enrollment] = api.campaigns.enrollments(seen["cid"])
    assert enrollment.current_key == "bump"
