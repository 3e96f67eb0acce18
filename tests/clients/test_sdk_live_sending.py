"""The SDK's methods for stopping an enrollment, per-variant stats, the sending status and
connecting an OAuth mailbox, against the live service."""

import asyncio
import os
import re
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from django.utils import timezone
from outreach_sdk import Client, errors

from accounts.services import api_key_create
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.clients.conftest import mailbox_create
from tests.support.ports import free_port

pytestmark = [pytest.mark.e2e]

PASSWORD = "hunter2-very-secret"

STEPS = [
    {
        "subject": "Hello {{first_name|there}}",
        "body_text": "Hi.",
        "variants": [{"subject": "Hey {{first_name|there}}", "body_text": "Hey."}],
    }
]


def test_stop_an_enrollment_and_read_the_stats_per_variant(service_url, sdk_key, smtp_sink):
    client = Client(api_key=sdk_key, base_url=service_url)
    mailbox = mailbox_create(client, smtp_sink())
    campaign = client.campaigns.create(name="AB", steps=STEPS, credential_ids=[mailbox.id])
    enrollment = client.outreaches.create(
        campaign_id=campaign.id, contact={"email": "kim@example.com"}
    )

    stopped = client.campaigns.stop_enrollment(campaign.id, enrollment.id)
    assert (stopped.id, stopped.status) == (enrollment.id, "stopped")
    with pytest.raises(errors.EnrollmentNotActive) as raised:
        client.campaigns.stop_enrollment(campaign.id, enrollment.id)
    assert (raised.value.status, raised.value.details["status"]) == (409, "stopped")

    status = client.campaigns.sending_status(campaign.id)
    assert status.campaign_id == campaign.id
    [box] = status.mailboxes
    assert box["credential_id"] == mailbox.id and box["reasons"] is not None

    stats = client.campaigns.stats(campaign.id)
    assert stats.raw["stopped"] == 1 and stats.raw["enrolled"] == 1
    assert [v["variant"] for v in stats.steps[0]["variants"]] == ["A", "B"]


def test_start_connecting_a_google_mailbox(service_server, sdk_key, sdk_account):
    unconfigured = Client(api_key=sdk_key, base_url=service_server())
    with pytest.raises(errors.OauthNotConfigured) as raised:
        unconfigured.mailboxes.start_oauth(provider="google")
    assert raised.value.status == 422

    url = service_server(
        GOOGLE_OAUTH_CLIENT_ID="client-id.apps.example",
        GOOGLE_OAUTH_CLIENT_SECRET="client-secret",
        GOOGLE_OAUTH_AUTHORIZE_URL="https://accounts.example/o/oauth2/auth",
    )
    started = Client(api_key=sdk_key, base_url=url).mailboxes.start_oauth(provider="google")
    assert started.expires_at is not None
    # The service's own page first: it names the account, and its button leads on to the
    # provider.
    path = urlsplit(started.authorization_url).path
    assert path.startswith("/oauth/connect/")
    browser = requests.Session()
    page = browser.get(f"{url}{path}", timeout=10)
    assert page.status_code == 200
    assert sdk_account.email in page.text
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert csrf is not None
    pressed = browser.post(
        f"{url}{path}",
        data={"csrfmiddlewaretoken": csrf.group(1)},
        allow_redirects=False,
        timeout=10,
    )
    assert pressed.status_code == 303
    assert pressed.headers["Location"].startswith("https://accounts.example/o/oauth2/auth?")
    assert "code_challenge_method=S256" in pressed.headers["Location"]


def test_the_sdk_and_the_mcp_tool_name_a_refused_connection(service_url, sdk_key, sdk_account):
    """The SDK README's trial with its SMTP server stopped: the sending status, through the
    SDK's repr and the MCP tool's summary, names the refusal, its words and the retry."""
    from tests.clients.test_mcp_server import _result, _session

    client = Client(api_key=sdk_key, base_url=service_url)
    port = free_port()  # nothing listens: the connection is refused
    mailbox = client.mailboxes.create(
        from_email="ada@example.com",
        smtp_host="127.0.0.1",
        smtp_port=port,
        smtp_security="none",
        smtp_username="ada",
        smtp_password=PASSWORD,
        min_interval_seconds=0,
        max_interval_seconds=0,
    )
    campaign = client.campaigns.create(name="Trial", steps=STEPS, credential_ids=[mailbox.id])
    client.outreaches.create(campaign_id=campaign.id, contact={"email": "kim@example.com"})
    now = timezone.now()
    for batch in schedule_due(now=now):
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id)
    [enrollment] = client.campaigns.enrollments(campaign.id)
    assert enrollment.last_error.startswith(f"cannot connect to 127.0.0.1:{port}")

    status = client.campaigns.sending_status(campaign.id)
    shown = repr(status)
    [blocker] = [r for r in status.mailboxes[0]["reasons"] if r["code"] == "mailbox_unreachable"]
    assert blocker["retry_at"] and blocker["since"]
    assert f"mailbox_unreachable ({enrollment.last_error}) since {blocker['since']}" in shown
    assert f"retry at {blocker['retry_at']}" in shown
    assert status.upcoming[0]["blocker"]["code"] == "mailbox_unreachable"
    assert PASSWORD not in shown

    mcp_key = api_key_create(account=sdk_account, label="agent", client_kind="mcp").plaintext
    # The server of this checkout (and its SDK), wherever the installed one points.
    clients = Path(__file__).resolve().parents[2] / "clients"
    env = {
        "OUTREACH_API_KEY": mcp_key,
        "OUTREACH_BASE_URL": service_url,
        "PYTHONPATH": os.pathsep.join([str(clients / "mcp"), str(clients / "python")]),
    }

    async def work(mcp):
        return _result(await mcp.call_tool("get_sending_status", {"campaign_id": campaign.id}))

    answer = asyncio.run(_session(env, work))
    assert answer["summary"] == status.summary
    assert "Connection refused" in answer["summary"][0]
    assert f"retry at {blocker['retry_at']}" in answer["summary"][0]
