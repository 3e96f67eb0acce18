"""The SDK and the MCP server show a mailbox's paused providers and its complaint pause,
against the live service (docs/deliverability.md)."""

import asyncio
from datetime import timedelta

import pytest
from django.utils import timezone
from outreach_sdk import Client

from outreach.models.mailboxes import SmtpCredential
from outreach.sending.breaker import strike_record
from tests.clients.conftest import mailbox_create

pytestmark = [pytest.mark.e2e]

DETAIL = "550 5.7.26 This mail has been blocked because the sender is unauthenticated."


def test_the_sdk_shows_paused_providers_and_resumes_a_paused_mailbox(
    service_url, sdk_key, smtp_sink
):
    client = Client(api_key=sdk_key, base_url=service_url)
    mailbox = mailbox_create(client, smtp_sink())
    campaign = client.campaigns.create(
        name="Breaker", steps=[{"subject": "Hi", "body_text": "Hi."}], credential_ids=[mailbox.id]
    )
    now = timezone.now()
    for _ in range(3):
        strike_record(
            credential_id=mailbox.id, provider="google", reason="blocks", detail=DETAIL, at=now
        )
    until = now + timedelta(hours=1)

    shown = client.mailboxes.retrieve(mailbox.id)
    [pause] = shown.provider_pauses
    assert (pause["provider"], pause["reason"], pause["detail"]) == ("google", "blocks", DETAIL)
    status = client.campaigns.sending_status(campaign.id)
    [line] = status.summary
    assert line.startswith(f"{mailbox.from_email}: ")
    assert f"provider_paused google until {until.strftime('%Y-%m-%dT%H:%M:%S')}" in line
    assert DETAIL in line

    SmtpCredential.objects.filter(pk=mailbox.id).update(
        paused_at=now, paused_reason="complaint_rate"
    )
    assert client.mailboxes.retrieve(mailbox.id).paused_reason == "complaint_rate"
    resumed = client.mailboxes.resume(mailbox.id)
    assert (resumed.paused_at, resumed.paused_reason) == (None, None)


def test_the_mcp_server_lists_a_mailboxs_paused_providers(service_url, sdk_key, smtp_sink):
    from tests.clients.test_mcp_server import _result, _session

    client = Client(api_key=sdk_key, base_url=service_url)
    mailbox = mailbox_create(client, smtp_sink())
    for _ in range(3):
        strike_record(
            credential_id=mailbox.id,
            provider="microsoft",
            reason="rate_limited",
            detail="451 4.7.650 The mail server has been temporarily rate limited",
            at=timezone.now(),
        )

    async def work(mcp):
        return _result(await mcp.call_tool("list_mailboxes", {}))

    env = {"OUTREACH_API_KEY": sdk_key, "OUTREACH_BASE_URL": service_url}
    [listed] = asyncio.run(_session(env, work))
    assert [p["provider"] for p in listed["provider_pauses"]] == ["microsoft"]
    assert listed["provider_pauses"][0]["reason"] == "rate_limited"
