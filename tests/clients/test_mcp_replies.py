"""The conversation tools of the MCP server, driven by the official MCP client over stdio
against the live service: replies listed, read, labelled; threads; and a response's
preview and the confirmation it needs (bound to the reply and the exact body, good
once). The server reaches the service through a recording proxy, so the test sees that
no refused call ever asked the service to send; the confirmed call sends once, to a real
SMTP server."""

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone
from mcp import Client as McpClient
from mcp.client.stdio import StdioServerParameters
from outreach_mcp.confirmation import Binding, Confirmations, InvalidToken
from outreach_sdk import Client

from accounts.services import api_key_create
from outreach.models.conversations import ReplyResponse
from outreach.models.mailboxes import SmtpCredential
from tests.accounts.factories import AccountFactory
from tests.clients.conftest import mailbox_create
from tests.clients.test_mcp_server import SCRIPT, _error, _result
from tests.conversations.reply_rows import reply_for, response_to
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CampaignFactory

pytestmark = [pytest.mark.e2e]

ANSWER = "Tuesday at 10 works for me.\n\nBest, Lin"


@pytest.fixture
def conversation(service_url, sdk_key, sdk_account, smtp_sink):
    """An enrollment of the account sent from a mailbox on an SMTP sink (where a
    confirmed response would go), and the MCP server's environment, through a proxy."""
    api = Client(api_key=sdk_key, base_url=service_url)
    sink = smtp_sink()
    credential = SmtpCredential.objects.get(pk=mailbox_create(api, sink).id)
    campaign = CampaignFactory(account=sdk_account, with_steps=2, with_credential=False)
    campaign.credentials.add(credential)
    return {"enrollment": sent_enrollment(campaign=campaign), "api": api, "sink": sink}


@pytest.fixture
def mcp_env(proxy, sdk_account) -> dict:
    key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    return {"OUTREACH_API_KEY": key, "OUTREACH_BASE_URL": proxy.url}


def _run(env: dict, work):
    async def session():
        params = StdioServerParameters(command=SCRIPT, env=env)
        async with McpClient(params, read_timeout_seconds=60) as mcp:
            return await work(mcp.call_tool, mcp)

    return asyncio.run(session())


def test_an_agent_reads_labels_and_follows_replies(conversation, mcp_env):
    enrollment = conversation["enrollment"]
    old = reply_for(enrollment, received_at=timezone.now() - timedelta(minutes=30), read=True)
    long_one = reply_for(enrollment, new_text="word " * 200, text="word " * 200)
    theirs = reply_for(sent_enrollment(account=AccountFactory()))
    campaign_id, enrollment_id = str(enrollment.campaign_id), str(enrollment.pk)

    async def work(call, mcp):
        seen = {"tools": {tool.name: tool for tool in (await mcp.list_tools()).tools}}
        seen["all"] = _result(await call("list_replies", {}))
        seen["unread"] = _result(await call("list_replies", {"read": False}))
        seen["bad_label"] = await call("list_replies", {"label": "happy"})
        seen["one"] = _result(await call("get_reply", {"reply_id": str(long_one.pk)}))
        seen["labelled"] = _result(
            await call(
                "label_reply", {"reply_id": str(old.pk), "label": "interested", "read": False}
            )
        )
        seen["interested"] = _result(await call("list_replies", {"label": "interested"}))
        seen["cleared"] = _result(
            await call("label_reply", {"reply_id": str(old.pk), "clear_label": True})
        )
        seen["nothing"] = _error(await call("label_reply", {"reply_id": str(old.pk)}))
        seen["both"] = _error(
            await call(
                "label_reply",
                {"reply_id": str(old.pk), "label": "other", "clear_label": True},
            )
        )
        seen["thread_by_reply"] = _result(await call("get_thread", {"reply_id": str(old.pk)}))
        seen["thread"] = _result(
            await call("get_thread", {"campaign_id": campaign_id, "enrollment_id": enrollment_id})
        )
        seen["thread_half"] = _error(await call("get_thread", {"campaign_id": campaign_id}))
        seen["theirs"] = _error(await call("get_reply", {"reply_id": str(theirs.pk)}))
        seen["label_theirs"] = _error(
            await call("label_reply", {"reply_id": str(theirs.pk), "read": True})
        )
        return seen

    seen = _run(mcp_env, work)

    tools = seen["tools"]
    for name in ("list_replies", "get_reply", "get_thread"):
        assert tools[name].annotations.read_only_hint, name
    assert tools["label_reply"].annotations.idempotent_hint
    assert not tools["label_reply"].annotations.read_only_hint
    respond = tools["respond_to_reply"].annotations
    assert respond.open_world_hint and not respond.read_only_hint
    assert set(tools["respond_to_reply"].input_schema["required"]) == {"reply_id", "body_text"}
    assert "confirmation_token" in tools["respond_to_reply"].description
    assert set(tools["list_replies"].input_schema["properties"]) >= {
        "campaign_id",
        "enrollment_id",
        "credential_id",
        "label",
        "read",
        "received_after",
    }

    # Lists: newest first, no bodies but the start of the new text.
    assert [r["id"] for r in seen["all"]] == [str(long_one.pk), str(old.pk)]
    summary = seen["all"][0]
    assert "html" not in summary and "text" not in summary
    assert len(summary["new_text"]) == 500 and summary["new_text_cut"] is True
    assert seen["all"][1]["new_text"] == "Sounds good." and seen["all"][1]["new_text_cut"] is False
    assert [r["id"] for r in seen["unread"]] == [str(long_one.pk)]
    assert seen["bad_label"].is_error  # refused by the tool's schema
    # A whole reply.
    assert seen["one"]["text"] == "word " * 200 and seen["one"]["html"] == "<p>Sounds good.</p>"
    # Labels.
    labelled = seen["labelled"]
    assert (labelled["label"], labelled["label_source"], labelled["read"]) == (
        "interested",
        "manual",
        False,
    )
    assert [r["id"] for r in seen["interested"]] == [str(old.pk)]
    assert (seen["cleared"]["label"], seen["cleared"]["read"]) == (None, False)
    old.refresh_from_db()
    assert (old.label, old.read) == ("", False)
    assert seen["nothing"] == "validation_failed: Give label, clear_label or read."
    assert seen["both"] == "validation_failed: Give label or clear_label, not both."
    # The thread, reached from a reply or from the enrollment.
    assert seen["thread_by_reply"] == seen["thread"]
    assert [e["type"] for e in seen["thread"]] == ["step", "reply", "reply"]
    assert [e["reply"]["id"] for e in seen["thread"][1:]] == [str(old.pk), str(long_one.pk)]
    assert seen["thread_half"].startswith("validation_failed: Give reply_id, or campaign_id")
    # Another account's reply does not exist for this key.
    assert seen["theirs"] == "reply_not_found: No such reply."
    assert seen["label_theirs"] == "reply_not_found: No such reply."
    theirs.refresh_from_db()
    assert theirs.read is False


def test_a_response_is_previewed_and_needs_a_token_for_that_reply_and_that_body(
    conversation, mcp_env, proxy
):
    enrollment = conversation["enrollment"]
    reply = reply_for(
        enrollment,
        subject="Hello",
        new_text="Sounds good.\nOne question:\nwhat does it cost?\nAnd when?\nThanks\nAda\nCEO",
    )
    other = reply_for(enrollment, received_at=timezone.now())
    orphan = reply_for(enrollment, credential_id=None)
    earlier = response_to(reply, body_text="Let me check.")
    rid = str(reply.pk)

    async def work(call, mcp):
        seen = {}
        seen["preview"] = _result(
            await call("respond_to_reply", {"reply_id": rid, "body_text": ANSWER})
        )
        token = seen["preview"]["confirmation_token"]
        seen["other_body"] = _result(
            await call(
                "respond_to_reply",
                {"reply_id": rid, "body_text": ANSWER + "!", "confirmation_token": token},
            )
        )
        seen["added_html"] = _result(
            await call(
                "respond_to_reply",
                {
                    "reply_id": rid,
                    "body_text": ANSWER,
                    "body_html": "<p>Tuesday</p>",
                    "confirmation_token": token,
                },
            )
        )
        seen["other_reply"] = _result(
            await call(
                "respond_to_reply",
                {"reply_id": str(other.pk), "body_text": ANSWER, "confirmation_token": token},
            )
        )
        seen["forged"] = _error(
            await call(
                "respond_to_reply",
                {"reply_id": rid, "body_text": ANSWER, "confirmation_token": token[:-4] + "AAAA"},
            )
        )
        seen["orphan"] = _result(
            await call("respond_to_reply", {"reply_id": str(orphan.pk), "body_text": ANSWER})
        )
        seen["requests_before_confirming"] = list(proxy.requests)
        # The confirmed call sends and spends the token; a second one with the same
        # token is refused before anything reaches the service.
        seen["confirmed"] = _result(
            await call(
                "respond_to_reply",
                {"reply_id": rid, "body_text": ANSWER, "confirmation_token": token},
            )
        )
        seen["requests_after_confirming"] = len(proxy.requests)
        seen["again"] = _error(
            await call(
                "respond_to_reply",
                {"reply_id": rid, "body_text": ANSWER, "confirmation_token": token},
            )
        )
        seen["requests_at_the_end"] = len(proxy.requests)
        return seen

    seen = _run(mcp_env, work)

    answer = seen["preview"]
    assert answer["status"] == "confirmation_required"
    assert answer["message"].startswith("Nothing was sent.")
    preview = answer["preview"]
    assert (preview["reply_id"], preview["to"], preview["to_name"]) == (
        rid,
        enrollment.contact.email,
        "Ada Lovelace",
    )
    assert preview["subject"] == "Re: Hello"  # the service's own (respond/preview)
    assert {h["name"]: h["value"] for h in preview["headers"]}["Subject"] == "Re: Hello"
    assert preview["refusal"] is None
    assert preview["from_mailbox"]["from_email"] == "ada@example.com"
    assert preview["from_mailbox"]["id"] == str(enrollment.credential_id)
    assert preview["from_mailbox"]["enabled"] is True
    assert preview["in_reply_to"]["first_lines"] == [
        "> Sounds good.",
        "> One question:",
        "> what does it cost?",
        "> And when?",
        "> Thanks",
    ]
    assert preview["in_reply_to"]["more_lines"] == 2
    assert (preview["body_text"], preview["body_html"]) == (ANSWER, None)
    assert [(r["id"], r["status"]) for r in preview["earlier_responses"]] == [
        (str(earlier.pk), "sent")
    ]
    assert preview["warnings"] == []

    for name in ("other_body", "added_html", "other_reply"):
        refused = seen[name]
        assert refused["status"] == "confirmation_required", name
        assert "changed since the preview" in refused["message"], name
        assert refused["confirmation_token"] != answer["confirmation_token"], name
    assert seen["other_body"]["preview"]["body_text"] == ANSWER + "!"
    assert seen["added_html"]["preview"]["body_html"] == "<p>Tuesday</p>"
    assert seen["other_reply"]["preview"]["reply_id"] == str(other.pk)
    assert seen["other_reply"]["preview"]["earlier_responses"] == []
    assert seen["forged"].startswith("invalid_confirmation_token: ")

    assert seen["orphan"]["preview"]["from_mailbox"] is None
    assert seen["orphan"]["preview"]["warnings"] == [
        "The mailbox that received this reply cannot send. (credential_unavailable)"
    ]
    assert seen["orphan"]["preview"]["refusal"]["details"] == {"reason": "deleted"}

    # Nothing asked the service to send before the confirmed call (its previews write
    # nothing), and nothing after it.
    posts = [p for m, p, _ in seen["requests_before_confirming"] if m == "POST"]
    assert posts and all(p.endswith("/respond/preview") for p in posts)
    assert seen["again"].startswith("invalid_confirmation_token: The confirmation token was used")
    assert seen["requests_at_the_end"] == seen["requests_after_confirming"]
    assert list(ReplyResponse.objects.filter(reply=other)) == []

    # The confirmed response went out once, to the contact, in the reply's thread.
    sent = ReplyResponse.objects.exclude(pk=earlier.pk).get(reply=reply)
    assert seen["confirmed"]["status"] == "responded"
    assert seen["confirmed"]["response"]["id"] == str(sent.pk)
    [received] = conversation["sink"].wait_for(1)
    assert received.rcpt_tos == [enrollment.contact.email]
    assert received.message["In-Reply-To"] == f"<{reply.message_id}>"
    assert received.message.get_content().replace("\r\n", "\n").strip() == ANSWER
    assert len(conversation["sink"].messages) == 1


def test_a_response_binding_is_the_reply_its_contact_and_the_exact_body():
    confirmations = Confirmations("s3cret")

    def binding(reply="r1", contact="c1", text="Hi", html=None):
        extra = {"body_text": text, "body_html": html}
        return Binding(action="respond_to_reply", target=reply, ids=[contact], extra=extra)

    token = confirmations.issue(binding()).token
    assert not confirmations.matches(token, binding(text="Hi "))  # another body
    assert not confirmations.matches(token, binding(html="<p>Hi</p>"))  # HTML added
    assert not confirmations.matches(token, binding(reply="r2"))  # another reply
    # Text and HTML are bound apart: moving characters between them is another body.
    split = confirmations.issue(binding(text="ab", html="c")).token
    assert not confirmations.matches(split, binding(text="a", html="bc"))
    dispatch = Binding(action="dispatch_campaign", target="r1", ids=["c1"], extra={})
    assert not confirmations.matches(confirmations.issue(dispatch).token, binding())
    confirmations.redeem(token, binding())
    with pytest.raises(InvalidToken, match="used already"):
        confirmations.redeem(token, binding())
