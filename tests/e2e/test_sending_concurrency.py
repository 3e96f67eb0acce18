"""Many SMTP sessions at once, on a real worker (threads, as the Procfile runs it):
slow servers sent to in parallel over a few database connections, and a mailbox whose
server never answers delaying nobody else."""

import threading
import time

import pytest
from django.db import connection

from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory

pytestmark = [pytest.mark.e2e]

WORKER_ENV = {"SENDING_SCHEDULE_INTERVAL_SECONDS": "0.5", "SENDING_SMTP_TIMEOUT_SECONDS": "60"}


def _mailbox_campaigns(
    account, sink, count: int, per_mailbox: int, prefix: str = "m"
) -> list[Campaign]:
    """`count` campaigns of one mailbox each at `sink`, each with `per_mailbox` contacts."""
    campaigns = []
    for i in range(count):
        campaign = CampaignFactory(account=account, status="active")
        SmtpCredential.objects.filter(pk=campaign.credentials.get().pk).update(
            smtp_host=sink.host, smtp_port=sink.port, smtp_security="none", smtp_username=""
        )
        for j in range(per_mailbox):
            contact = ContactFactory(account=account, email=f"{prefix}{i}-{j}@example.org")
            EnrollmentFactory(
                campaign=campaign,
                contact=contact,
                status=Enrollment.Status.SCHEDULED,
                next_send_at="2026-01-01T00:00:00Z",
            )
        campaigns.append(campaign)
    return campaigns


class ConnectionCounter:
    """Samples, in the background, how many connections the worker (PGAPPNAME
    `e2e-worker`, which libpq sends as application_name) holds: the most it saw."""

    def __init__(self):
        self.peak = 0
        self.error = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        try:
            self._sample()
        except BaseException as exc:  # reported by __exit__
            self.error = exc

    def _sample(self):
        import psycopg

        params = connection.get_connection_params()
        for key in ("cursor_factory", "context", "pool"):
            params.pop(key, None)
        with psycopg.connect(**params, autocommit=True) as conn:
            while not self._stop.is_set():
                (count,) = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                    " AND application_name = 'e2e-worker'"
                ).fetchone()
                self.peak = max(self.peak, count)
                time.sleep(0.05)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(timeout=5)
        if self.error is not None:
            raise self.error


def test_thirty_slow_mailboxes_send_at_once_over_a_few_connections(
    live_db, account, smtp_sink, celery_worker
):
    # Every reply 200 ms late: one mailbox's 3 messages take about 3 s in a row.
    sink = smtp_sink(reply_delay=0.2, data_delay=0.4)
    _mailbox_campaigns(account, sink, count=30, per_mailbox=3)
    with ConnectionCounter() as counter:
        celery_worker(
            beat=True,
            concurrency=40,
            env={**WORKER_ENV, "DB_POOL_MAX_SIZE": "3", "PGAPPNAME": "e2e-worker"},
        )
        sink.wait_for(90, timeout=150)
    deadline = time.monotonic() + 30
    while Message.objects.count() < 90:  # the last records
        assert time.monotonic() < deadline
        time.sleep(0.1)

    assert Message.objects.count() == 90
    assert not Enrollment.objects.exclude(status="completed").exists()
    # 40 threads, 30 sessions at once, and the worker (beat inside it) never held more
    # than its pool of 3 connections.
    assert 1 <= counter.peak <= 3
    assert len({m.mail_from for m in sink.messages}) == 30


def test_a_mailbox_whose_server_never_answers_delays_only_itself(
    live_db, account, smtp_sink, celery_worker
):
    healthy = smtp_sink(reply_delay=0.05)
    hanging = smtp_sink(hang=True)
    _mailbox_campaigns(account, hanging, count=1, per_mailbox=3, prefix="hang")
    _mailbox_campaigns(account, healthy, count=10, per_mailbox=3)
    celery_worker(beat=True, concurrency=8, env=WORKER_ENV)

    healthy.wait_for(30, timeout=150)
    deadline = time.monotonic() + 30
    while Enrollment.objects.filter(status="completed").count() < 30:  # the last records
        assert time.monotonic() < deadline, "the healthy mailboxes' sends were not recorded"
        time.sleep(0.1)
    stuck = Enrollment.objects.filter(contact__email__startswith="hang")
    assert stuck.count() == 3 and not stuck.filter(status="completed").exists()
    assert not Message.objects.filter(enrollment__in=stuck).exists()
