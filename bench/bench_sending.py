"""Benchmark: messages per second through the sending engine vs. a plain smtplib loop.

    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/bench_sending.py 2000

Both send to the same local aiosmtpd sink (tests/support/smtp.py, in its own process,
accepting everything). Baseline: one smtplib connection sending the same messages
(same sizes, already rendered) in a loop, nothing else. Service: one worker's path --
the scheduler claiming the enrollments (windows, limits, rotation, claims), then
`batch_send` for each batch (render, conditional start mark, SMTP, and per message the
recording transaction: Message row, enrollment, counters, usage, enrollment.sent event
with one webhook's delivery job and its task published to the broker). Goal: the
service reaches at least 50% of the baseline's rate.
"""

import os
import smtplib
import sys
import time
from datetime import timedelta

# Webhook delivery tasks go to the broker as in production, not run inline.
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "false"
os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # the sink is on loopback

from _peers import process_stop, smtp_sink_start  # noqa: E402
from _setup import (  # noqa: E402
    account_create,
    account_drop,
    contacts_create,
    messages_render,
    prepare,
    step_create,
)


def main(count: int) -> None:
    prepare()
    from django.conf import settings
    from django.utils import timezone

    from outreach.models.campaigns import Campaign
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import Enrollment, Message
    from outreach.sending.scheduler import schedule_due
    from outreach.sending.send import batch_send
    from tests.support.ports import free_port
    from webhooks.models import Event, Webhook
    from webhooks.secrets import secret_generate

    port = free_port()
    sink = smtp_sink_start(port=port)
    account = account_create("sending")
    try:
        credential = SmtpCredential.objects.create(
            account=account,
            from_email="bench@sender.example",
            from_name="Bench",
            smtp_host="127.0.0.1",
            smtp_port=port,
            smtp_security="none",
            daily_limit=count * 2,
            # Raw throughput: one run claims every message of the mailbox (a paced
            # mailbox would get one per run, spaced by its interval).
            min_interval_seconds=0,
            max_interval_seconds=0,
        )
        campaign = Campaign.objects.create(
            account=account, name="bench", status=Campaign.Status.ACTIVE
        )
        campaign.credentials.add(credential)
        step_create(campaign)
        Webhook.objects.create(
            account=account,
            url="http://127.0.0.1:9/never",
            event_filters=["*"],
            secret=secret_generate(),
        )
        contacts = contacts_create(account, count)
        now = timezone.now()
        Enrollment.objects.bulk_create(
            [
                Enrollment(
                    campaign=campaign,
                    contact=c,
                    status=Enrollment.Status.SCHEDULED,
                    next_send_at=now - timedelta(seconds=1),
                )
                for c in contacts
            ]
        )

        # The same messages, rendered once, for the baseline.
        payloads = messages_render(
            Enrollment.objects.filter(campaign=campaign).select_related("contact", "campaign"),
            credential=credential,
            now=now,
        )
        started = time.perf_counter()
        conn = smtplib.SMTP("127.0.0.1", port, timeout=30)
        conn.ehlo()
        for outgoing in payloads:
            conn.sendmail(credential.from_email, [outgoing.to_email], outgoing.data)
        conn.quit()
        baseline = time.perf_counter() - started

        started = time.perf_counter()
        sent = 0
        claim_seconds = 0.0
        while True:
            tick = time.perf_counter()
            batches = schedule_due(now=timezone.now())
            claim_seconds += time.perf_counter() - tick
            if not batches:
                break
            for batch in batches:
                sent += batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id).sent
        service = time.perf_counter() - started

        assert sent == count, f"sent {sent} of {count}"
        assert Message.objects.filter(account=account).count() == count
        base_rate, service_rate = count / baseline, count / service
        print(
            f"{count} messages, batches of {settings.SENDING_BATCH_SIZE}, "
            f"database {settings.DATABASES['default']['NAME']}"
        )
        print(f"baseline (plain smtplib loop): {base_rate:,.0f} msg/s ({baseline:.2f} s)")
        print(
            f"service (scheduler + batch_send): {service_rate:,.0f} msg/s ({service:.2f} s, "
            f"of which claiming {claim_seconds:.2f} s)"
        )
        print(f"ratio: {100 * service_rate / base_rate:.0f}% (goal: at least 50%)")
    finally:
        process_stop(sink)
        Event.objects.filter(account=account).delete()
        Message.objects.filter(account=account).delete()
        account_drop(account)
        _broker_purge()


def _broker_purge() -> None:
    """Drop the webhook delivery tasks the run published (nobody consumes them)."""
    url = os.environ.get("REDIS_URL")
    if url:
        import redis

        client = redis.Redis.from_url(url)
        client.delete("webhooks")
        client.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2000)
