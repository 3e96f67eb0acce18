"""The SDK's methods for stopping an enrollment, per-variant stats, the sending status and
connecting an OAuth mailbox, against the live service."""

import re
from urllib.parse import urlsplit

import pytest
import requests
from outreach_sdk import Client, errors

from tests.clients.conftest import mailbox_create

pytestmark = [pytest.mark.e2e]

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
