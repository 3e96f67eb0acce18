"""The SDK against a live service with production's abuse guards on: a new account is
refused dispatch and outreach (`EmailUnverified`) until it opens the link emailed to it,
asks for a new one with `email_verification.send()`, and its mailbox must log in."""

import re

import pytest
import requests
from outreach_sdk import Client, EmailUnverified, PermissionDeniedError, ValidationFailed

from tests.clients.conftest import mailbox_create

pytestmark = pytest.mark.e2e

STEPS = [{"subject": "Hello", "body_text": "Hi.", "delay_minutes": 60}]


def test_a_new_account_proves_its_address_before_it_sends(service_server, smtp_sink):
    sink = smtp_sink()
    url = service_server(
        SIGNUP_EMAIL_VERIFICATION="true",
        SMTP_REQUIRE_LOGIN="true",
        EMAIL_URL=f"smtp://{sink.host}:{sink.port}",
    )
    signup = Client(base_url=url).signup(email="new@example.com")
    [welcome] = sink.wait_for(1)
    assert welcome.message["To"] == "new@example.com"
    client = Client(api_key=signup.api_key.plaintext, base_url=url)

    with pytest.raises(ValidationFailed) as refused:
        client.mailboxes.create(
            from_email="new@example.com", smtp_host=sink.host, smtp_port=sink.port
        )
    assert "A login is required" in refused.value.message
    mailbox = mailbox_create(client, sink)
    campaign = client.campaigns.create(name="Q4", steps=STEPS, credential_ids=[mailbox.id])

    with pytest.raises(EmailUnverified) as unverified:
        client.outreaches.create(campaign_id=campaign.id, contact={"email": "ada@example.org"})
    assert isinstance(unverified.value, PermissionDeniedError)
    assert unverified.value.status == 403
    assert unverified.value.details["email"] == "new@example.com"

    state = client.email_verification.send()
    assert (state.email_verified, state.verification_sent) == (False, True)
    [_, again] = sink.wait_for(2)
    token = re.search(r"/signup/verify/(\S+)", again.message.get_content()).group(1)
    assert requests.post(f"{url}/signup/verify/{token}", timeout=10).status_code == 200

    assert client.email_verification.retrieve().email_verified is True
    enrollment = client.outreaches.create(
        campaign_id=campaign.id, contact={"email": "ada@example.org"}
    )
    assert enrollment.status == "scheduled"
