"""The walk of one step through the project's code: from the beat's scheduler run to the
webhook POST of its `enrollment.sent` event, counted in files, functions and returns.

    DATABASE_URL=postgres://... REDIS_URL=redis://... .venv/bin/python bench/walk_one_step.py

Not a timing. One mailbox on a local SMTP sink, one webhook on a local HTTP receiver,
every task run inline (eager, as one process would run them one after another). A first
contact warms the caches and imports; the second one's step is traced
(tests/support/walk.py says what each count means). Printed: the files, functions,
calls, comebacks and climbs, the files with the most comebacks, every climb, the files
in the order of their first entry, and with `--route` the route itself.
"""

import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

os.environ["CELERY_TASK_ALWAYS_EAGER"] = "true"
os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # the peers are on loopback

from _peers import process_stop, receiver_start, smtp_sink_start  # noqa: E402
from _setup import (  # noqa: E402
    account_create,
    account_drop,
    contacts_create,
    prepare,
    step_create,
)

from tests.support.walk import Walk  # noqa: E402


def _step(enrollment_pk, log: Path, posts_before: int) -> None:
    from outreach.sending.beat import schedule_sends

    queued = schedule_sends()
    deadline = time.monotonic() + 30
    while _posts(log) <= posts_before and time.monotonic() < deadline:
        time.sleep(0.05)
    if queued != 1 or _posts(log) <= posts_before:
        from webhooks.models import DeliveryJob, WebhookDelivery

        attempts = list(WebhookDelivery.objects.values_list("status_code", "error")[:3])
        attempts += list(DeliveryJob.objects.values_list("state", "attempts")[:3])
        raise SystemExit(
            f"the step of {enrollment_pk} did not reach its webhook POST "
            f"(batches queued: {queued}; attempts: {attempts})"
        )


def _posts(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def main() -> None:
    prepare()
    from django.utils import timezone

    from outreach.models.campaigns import Campaign
    from outreach.models.mailboxes import SmtpCredential
    from outreach.models.sending import Enrollment, Message
    from tests.support.ports import free_port
    from webhooks.models import Event, Webhook
    from webhooks.secrets import secret_generate

    smtp_port, http_port = free_port(), free_port()
    log = Path(tempfile.mkdtemp()) / "posts.log"
    sink = smtp_sink_start(port=smtp_port)
    receiver = receiver_start(ports=[http_port], log=log)
    account = account_create("walk")
    try:
        credential = SmtpCredential.objects.create(
            account=account,
            from_email="walk@sender.example",
            from_name="Walk",
            smtp_host="127.0.0.1",
            smtp_port=smtp_port,
            smtp_security="none",
            daily_limit=100,
            min_interval_seconds=0,
            max_interval_seconds=0,
        )
        campaign = Campaign.objects.create(account=account, name="walk", status="active")
        campaign.credentials.add(credential)
        step_create(campaign)
        Webhook.objects.create(
            account=account,
            url=f"http://127.0.0.1:{http_port}/hook",
            event_filters=["enrollment.sent"],
            secret=secret_generate(),
        )
        # Both enrolled first (a campaign whose every enrollment is done completes): the
        # second is due once the first has gone.
        now = timezone.now()
        enrollments = [
            Enrollment.objects.create(
                campaign=campaign,
                contact=contact,
                status=Enrollment.Status.SCHEDULED,
                next_send_at=now + timedelta(seconds=due),
            )
            for contact, due in zip(contacts_create(account, 2), (-1, 2), strict=True)
        ]
        _step(enrollments[0].pk, log, _posts(log))  # warm: imports, caches, connections
        time.sleep(max(0.0, (enrollments[1].next_send_at - timezone.now()).total_seconds()))
        walk = Walk()
        posts = _posts(log)
        with walk.tracing():
            _step(enrollments[1].pk, log, posts)
        _report(walk)
    finally:
        process_stop(sink)
        process_stop(receiver)
        Event.objects.filter(account=account).delete()
        Message.objects.filter(account=account).delete()
        account_drop(account)
        log.unlink(missing_ok=True)
        log.parent.rmdir()


def _report(walk: Walk) -> None:
    print(f"files: {len(walk.visited)}")
    print(f"functions: {len(walk.functions)}")
    print(f"calls: {walk.calls}")
    print(f"comebacks: {sum(walk.comebacks.values())}")
    print(f"climbs: {sum(walk.climbs.values())}")
    print("most comebacks:")
    for name, count in walk.comebacks.most_common(12):
        print(f"  {count:4d}  {name}")
    print("climbs (caller -> callee already lower on the stack):")
    for (caller, callee), count in walk.climbs.most_common():
        print(f"  {count:4d}  {caller} -> {callee}")
    print("files entered, in order of first entry:")
    for name in walk.visited:
        print(f"        {name}")
    if "--route" in sys.argv:
        print("the route (each call into another file, indented by the files under it):")
        for line in walk.route:
            print(f"  {line}")


if __name__ == "__main__":
    main()
