"""The metrics of a live stack: the web server (two workers) and a Celery worker running beat,
sharing one multi-process metrics folder as `make run`'s processes do, an SMTP sink
that defers one address once and rejects another, and a webhook receiver that fails
twice. After the run, a scrape of the web's GET /metrics shows the counters moved by
exactly what happened, whichever process counted it. And with no folder set at all,
the production default, a worker's counter still reaches the web's scrape."""

import time

import pytest
import requests

from accounts.services import api_key_create
from config.metrics_folder import folder_default, var_dir
from config.procfile import multiprocess_dir_reset
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.accounts.test_rate_limit_server import _server_env, _stop, _web
from tests.e2e.test_sending_e2e import WORKER_ENV, _campaign_at, _wait_until
from tests.foundation.test_metrics import TOKEN, families_of
from tests.outreach.factories import ContactFactory, CredentialFactory, EnrollmentFactory
from tests.support.celery_worker import send_task
from tests.support.database import live_database_url
from tests.support.ports import free_port
from webhooks.models import DeliveryJob
from webhooks.services import webhook_create

pytestmark = [pytest.mark.e2e]


def _scrape(url: str) -> dict:
    response = requests.get(
        f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10
    )
    assert response.status_code == 200, response.text
    return families_of(response.text)


def _sample(families: dict, family: str, sample: str, **labels) -> float:
    # A family no process has written to yet is absent from the multi-process files.
    samples = families.get(family, {"samples": {}})["samples"]
    return samples.get((sample, *sorted(labels.items())), 0.0)


def test_counters_move_by_exactly_what_the_stack_did(
    live_db, account, settings, smtp_sink, receiver, celery_worker, tmp_path
):
    folder = tmp_path / "metrics"
    multiprocess_dir_reset(folder)
    shared = {"PROMETHEUS_MULTIPROC_DIR": str(folder), "METRICS_TOKEN": TOKEN}
    sink = smtp_sink()
    webhook_create(account=account, url=receiver.url, event_filters=["*"])
    # The first two deliveries fail: a 500 is retried (and then succeeds), a 400 is not.
    receiver.script(500, 400)
    campaign = _campaign_at(sink, account, steps=1)
    late, bounced = "late@example.org", "gone@example.org"
    contacts = [
        ContactFactory(account=account, email=email) for email in ("ada@example.org", late, bounced)
    ]
    for contact in contacts:
        EnrollmentFactory(campaign=campaign, contact=contact)
    sink.reject_rcpt(late, "451 4.7.1 Try again later", times=1)
    sink.reject_rcpt(bounced, "550 5.1.1 User unknown")
    key = api_key_create(account=account, label="live").plaintext

    process, url = _web(
        _server_env(
            DATABASE_URL=live_database_url(),
            REDIS_URL=settings.REDIS_URL or None,
            RATE_LIMIT_KEY_PREFIX=settings.RATE_LIMIT_KEY_PREFIX,
            # The dispatch rings the scheduler through the broker: the worker sends.
            CELERY_TASK_ALWAYS_EAGER="false",
            **shared,
        )
    )
    try:
        # The workers' first answer includes their start (Django and every app imported, on
        # a loaded machine well over 10 s): not under the scrape's timeout.
        requests.get(f"{url}/health", timeout=120)
        before = _scrape(url)
        celery_worker(beat=True, env={**WORKER_ENV, **shared, "SENDING_RETRY_SCHEDULE": "1,1,1,1"})
        response = requests.post(
            f"{url}/campaigns/{campaign.pk}/dispatch",
            json={"contact_ids": [str(c.pk) for c in contacts]},
            headers={"Authorization": f"Bearer {key}"},
            timeout=10,
        )
        assert response.status_code == 200, response.text

        _wait_until(
            lambda: (
                not Enrollment.objects.filter(
                    campaign=campaign, status__in=Enrollment.ACTIVE_STATUSES
                ).exists()
            ),
            timeout=60,
            what="every enrollment settled",
        )
        # Two sent, one bounced: three events; four requests (the 500 was tried again).
        _wait_until(
            lambda: (
                DeliveryJob.objects.count() == 3
                and not DeliveryJob.objects.filter(state__in=DeliveryJob.ACTIVE_STATES).exists()
            ),
            timeout=60,
            what="every delivery finished",
        )
        time.sleep(1.5)  # three scheduler and sweep ticks: nothing more may happen
        after = _scrape(url)
    finally:
        _stop(process)

    def moved(family: str, sample: str, **labels) -> float:
        return _sample(after, family, sample, **labels) - _sample(before, family, sample, **labels)

    sends = {
        outcome: moved(
            "outreach_sends", "outreach_sends_total", outcome=outcome, auth_method="password"
        )
        for outcome in ("accepted", "deferred", "bounced", "failed", "unknown")
    }
    assert sends == {"accepted": 2, "deferred": 1, "bounced": 1, "failed": 0, "unknown": 0}
    assert len(sink.messages) == 2
    # Each message that left has its lateness observed.
    assert moved("outreach_send_lateness_seconds", "outreach_send_lateness_seconds_count") == 2
    assert (
        _sample(after, "outreach_smtp_sessions_in_flight", "outreach_smtp_sessions_in_flight") == 0
    )

    attempts = {
        outcome: moved(
            "outreach_webhook_attempts", "outreach_webhook_attempts_total", outcome=outcome
        )
        for outcome in ("succeeded", "retry", "failed")
    }
    assert attempts == {"succeeded": 2, "retry": 1, "failed": 1}
    assert len(receiver.requests) == 4
    deliveries = {
        outcome: moved(
            "outreach_webhook_deliveries", "outreach_webhook_deliveries_total", outcome=outcome
        )
        for outcome in ("succeeded", "failed", "dropped")
    }
    assert deliveries == {"succeeded": 2, "failed": 1, "dropped": 0}
    assert (
        moved(
            "outreach_webhook_delivery_latency_seconds",
            "outreach_webhook_delivery_latency_seconds_count",
        )
        == 2
    )

    dispatch_route = "campaigns/(?P<pk>[^/.]+)/dispatch"
    assert (
        moved(
            "outreach_http_requests",
            "outreach_http_requests_total",
            route=dispatch_route,
            method="POST",
            status="200",
        )
        == 1
    )
    # The state gauges, read by the scrape: nothing is left to do.
    assert _sample(after, "outreach_send_backlog", "outreach_send_backlog") == 0
    assert _sample(after, "outreach_webhook_jobs", "outreach_webhook_jobs", state="pending") == 0


def test_without_a_folder_set_the_web_shows_a_workers_counters(
    live_db, account, settings, celery_worker
):
    """No PROMETHEUS_MULTIPROC_DIR anywhere (the production default): the web and the
    worker agree on the service's own folder under VAR_DIR, so a mailbox poll the worker
    made is on the web's /metrics."""
    credential = CredentialFactory(
        account=account, imap_host="127.0.0.1", imap_port=free_port(), imap_security="none"
    )
    env = _server_env(
        DATABASE_URL=live_database_url(),
        REDIS_URL=settings.REDIS_URL or None,
        METRICS_TOKEN=TOKEN,
    )
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    process, url = _web(env)
    try:
        requests.get(f"{url}/health", timeout=120)
        before = _scrape(url)
        celery_worker(env={"PROMETHEUS_MULTIPROC_DIR": None, "METRICS_TOKEN": TOKEN})
        send_task("outreach.tasks.intake_poll_mailbox", str(credential.pk))
        _wait_until(
            lambda: SmtpCredential.objects.filter(
                pk=credential.pk, imap_last_error_at__isnull=False
            ).exists(),
            timeout=60,
            what="the poll's error recorded",
        )
        after = _scrape(url)
    finally:
        _stop(process)

    def polls(families: dict) -> float:
        return _sample(
            families, "outreach_imap_polls", "outreach_imap_polls_total", outcome="error"
        )

    assert polls(after) - polls(before) == 1
    assert folder_default(var_dir()).is_dir()
