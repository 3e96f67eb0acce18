""" "Why isn't it sending?" names the real blocker: a mailbox whose last attempt could not
connect or log in shows `mailbox_unreachable` in GET /campaigns/:id/sending_status, with
the recorded words (never a secret), when they were recorded and when it is tried again;
its planned sends carry it as their `blocker`; the worker's log and the sending task's
answer say the same."""

import base64
import logging
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from outreach.campaigns.sending_status import sending_status
from outreach.models.mailboxes import SmtpCredential
from outreach.sending.scheduler import schedule_due
from outreach.sending.tasks import send_mailboxes
from tests.outreach.factories import CampaignFactory, CredentialFactory
from tests.outreach.test_sending import _enroll, _point_at, _run
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db

PASSWORD = "hunter2-very-secret"


def _shown(at: datetime) -> str:
    """A timestamp as the API writes it."""
    return at.astimezone(UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "Z"


def _unreachable(account, port: int):
    """An active campaign whose one mailbox logs in to a loopback port nobody listens on."""
    campaign = CampaignFactory(account=account, status="active")
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        smtp_host="127.0.0.1", smtp_port=port, smtp_security="none", smtp_password=PASSWORD
    )
    return campaign, credential


def test_a_refused_connection_is_named_with_its_words_and_its_retry(
    api_client, account, settings, smtp_sink, caplog
):
    settings.SENDING_RETRY_SCHEDULE = [300]
    port = free_port()
    campaign, credential = _unreachable(account, port)
    now = timezone.now()
    enrollment = _enroll(campaign, at=now)

    with caplog.at_level(logging.WARNING, logger="outreach.sending.batch"):
        [result] = _run(now)

    retry_at = now + timedelta(seconds=300)
    assert (result.retried, result.retry_at) == (1, retry_at)
    response = api_client.get(f"/campaigns/{campaign.pk}/sending_status")
    assert response.status_code == 200
    body = response.json()
    [box] = body["mailboxes"]
    assert box["can_send_now"] is False
    blocker, nothing_due = box["reasons"]
    assert blocker["code"] == "mailbox_unreachable" and blocker["until"] is None
    assert blocker["detail"].startswith(f"cannot connect to 127.0.0.1:{port}: ")
    assert "Connection refused" in blocker["detail"]
    assert (blocker["since"], blocker["retry_at"]) == (_shown(now), _shown(retry_at))
    assert nothing_due == {
        "code": "nothing_due",
        "until": _shown(retry_at),
        "detail": None,
        "since": None,
        "retry_at": None,
    }
    [upcoming] = body["upcoming"]
    assert (upcoming["enrollment_id"], upcoming["earliest_at"]) == (
        str(enrollment.pk),
        _shown(retry_at),
    )
    assert upcoming["blocker"] == blocker
    assert PASSWORD not in response.content.decode()

    [line] = [r.getMessage() for r in caplog.records if "retried" in r.getMessage()]
    assert f"mailbox {credential.pk} cannot connect: retried: 1" in line
    assert f"next try at {retry_at.strftime('%Y-%m-%dT%H:%M:%S')}Z" in line
    assert blocker["detail"] in line

    # The mailbox works again: its first login clears the blocker.
    _point_at(SmtpCredential.objects.get(pk=credential.pk), smtp_sink())
    [result] = _run(retry_at)
    assert result.sent == 1
    box = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()["mailboxes"][0]
    assert "mailbox_unreachable" not in [reason["code"] for reason in box["reasons"]]


def test_a_login_failure_is_named_until_its_retry(api_client, account, settings, smtp_sink):
    settings.SENDING_CREDENTIAL_RETRY_SECONDS = 900
    sink = smtp_sink(username="ada", password="another password")
    campaign, credential = _unreachable(account, sink.port)
    SmtpCredential.objects.filter(pk=credential.pk).update(smtp_username="ada")
    now = timezone.now()
    _enroll(campaign, at=now)
    _enroll(campaign, at=now)

    [result] = _run(now)

    retry_at = now + timedelta(seconds=900)
    assert result.mailbox_error.startswith("authentication failed: 535")
    assert result.retry_at == retry_at
    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    [box] = body["mailboxes"]
    blocker = box["reasons"][0]
    assert blocker["code"] == "mailbox_unreachable"
    assert blocker["detail"] == result.mailbox_error
    assert blocker["retry_at"] == _shown(retry_at)
    assert [u["blocker"]["code"] for u in body["upcoming"]] == ["mailbox_unreachable"] * 2
    assert sink.messages == []


def test_a_secret_in_the_recorded_words_never_shows(api_client, account):
    """A server may echo what AUTH sent: the password, or its base64 form."""
    campaign, credential = _unreachable(account, free_port())
    echoed = base64.b64encode(PASSWORD.encode()).decode()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        last_error=f"authentication failed: 535 bad password {PASSWORD} ({echoed})",
        last_error_at=timezone.now(),
    )
    response = api_client.get(f"/campaigns/{campaign.pk}/sending_status")
    [blocker] = response.json()["mailboxes"][0]["reasons"][:1]
    assert blocker["detail"] == ("authentication failed: 535 bad password [redacted] ([redacted])")
    assert PASSWORD not in response.content.decode() and echoed not in response.content.decode()


def test_a_disabled_mailbox_is_held_by_its_disabling_not_its_last_error(account):
    campaign, credential = _unreachable(account, free_port())
    SmtpCredential.objects.filter(pk=credential.pk).update(
        last_error="cannot connect", last_error_at=timezone.now(), disabled_at=timezone.now()
    )
    campaign.refresh_from_db()
    answer = sending_status(campaign=campaign, now=timezone.now())
    assert [r["code"] for r in answer["mailboxes"][0]["reasons"]] == ["mailbox_disabled"]


def test_the_sending_task_says_why_and_when_it_retries(account, settings):
    """Celery logs the task's answer: today's `retried: 1` now carries the words and the
    time of the retry."""
    settings.SENDING_RETRY_SCHEDULE = [600]
    port = free_port()
    campaign, credential = _unreachable(account, port)
    _enroll(campaign, at=timezone.now() - timedelta(seconds=1))
    [batch] = schedule_due(now=timezone.now())
    before = timezone.now()

    answer = send_mailboxes([[str(batch.credential_id), [str(batch.batch_id)]]])

    assert answer["retried"] == 1
    assert answer["retry_reason"].startswith(f"cannot connect to 127.0.0.1:{port}: ")
    retry_at = datetime.fromisoformat(answer["retry_at"].replace("Z", "+00:00"))
    assert before + timedelta(seconds=600) <= retry_at <= timezone.now() + timedelta(seconds=600)


def test_the_published_schema_has_the_new_fields(anon_client):
    response = anon_client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json")
    schemas = response.json()["components"]["schemas"]
    reason = schemas["SendingReason"]["properties"]
    assert {"since", "retry_at"} <= set(reason)
    assert "blocker" in schemas["UpcomingSend"]["properties"]
    assert "mailbox_unreachable" in response.content.decode()


def test_a_recipients_4xx_is_logged_with_its_words_and_retry(account, settings, smtp_sink, caplog):
    """A refusal of one recipient is that enrollment's, not the mailbox's: logged with
    its retry, no mailbox_unreachable."""
    settings.SENDING_RETRY_SCHEDULE = [900]
    sink = smtp_sink()
    campaign, credential = _unreachable(account, sink.port)
    _point_at(SmtpCredential.objects.get(pk=credential.pk), sink, smtp_username="")
    now = timezone.now()
    enrollment = _enroll(campaign, at=now, email="kim@example.org")
    sink.reject_rcpt("kim@example.org", "451 4.7.1 Greylisted, try again later")

    with caplog.at_level(logging.WARNING, logger="outreach.sending.batch"):
        [result] = _run(now)

    retry_at = now + timedelta(seconds=900)
    assert (result.retried, result.retry_at) == (1, retry_at)
    [line] = [r.getMessage() for r in caplog.records if "retried" in r.getMessage()]
    assert line == (
        f"enrollment {enrollment.pk}: retried, next try at "
        f"{retry_at.strftime('%Y-%m-%dT%H:%M:%S')}Z: 451 4.7.1 Greylisted, try again later"
    )
    campaign.refresh_from_db()
    codes = [
        r["code"] for r in sending_status(campaign=campaign, now=now)["mailboxes"][0]["reasons"]
    ]
    assert "mailbox_unreachable" not in codes


def test_every_form_of_a_mailboxs_secret_is_hidden():
    from outreach.mailboxes.secrets import secrets_hidden

    credential = SmtpCredential(
        smtp_username="ada", smtp_password=PASSWORD, oauth_access_token="ya29.token-value"
    )
    plain = base64.b64encode(f"\0ada\0{PASSWORD}".encode()).decode()  # AUTH PLAIN
    login = base64.b64encode(PASSWORD.encode()).decode()  # AUTH LOGIN
    text = f"535 {plain} {login} {PASSWORD} ya29.token-value other words"
    assert secrets_hidden(text, credential) == (
        "535 [redacted] [redacted] [redacted] [redacted] other words"
    )


def test_a_secret_a_send_did_not_load_is_not_read_to_hide_it(django_assert_num_queries):
    """A send loads only what it logs in with (outreach.sending.send): the others were
    never sent, so nothing can echo them, and hiding them costs no query."""
    from outreach.mailboxes.secrets import secrets_hidden

    credential = CredentialFactory(smtp_username="ada", smtp_password=PASSWORD)
    loaded = SmtpCredential.objects.defer("imap_password", "oauth_refresh_token").get(
        pk=credential.pk
    )
    with django_assert_num_queries(0):
        assert secrets_hidden(f"535 {PASSWORD} other words", loaded) == "535 [redacted] other words"
