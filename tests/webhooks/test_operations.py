"""Back office: the admin pages and action, and the management commands."""

from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.utils import timezone

from tests.support.receiver import Reply
from tests.support.stored import stored_value
from tests.webhooks.factories import WebhookDeliveryFactory, WebhookFactory
from webhooks.events import event_emit
from webhooks.models import DeliveryJob, Event, WebhookDelivery

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]


@pytest.fixture
def failed_job(account, receiver, django_capture_on_commit_callbacks):
    """A delivery that ended on a 410 (not retried)."""
    webhook = WebhookFactory(account=account, url=receiver.url)
    receiver.script(Reply(410))
    with django_capture_on_commit_callbacks(execute=True):
        event_emit(account=account, event_type="enrollment.sent", data={"n": 1})
    job = DeliveryJob.objects.get(webhook=webhook)
    assert job.state == "failed"
    return job


def test_admin_pages_render_without_the_secret(admin_client, failed_job):
    webhook = failed_job.webhook
    for url in (
        "/admin/webhooks/webhook/",
        f"/admin/webhooks/webhook/{webhook.id}/change/",
        "/admin/webhooks/webhookdelivery/",
        f"/admin/webhooks/webhookdelivery/{WebhookDelivery.objects.get().id}/change/",
        "/admin/webhooks/deliveryjob/",
    ):
        response = admin_client.get(url)
        assert response.status_code == 200, url
        assert webhook.secret.encode() not in response.content
        assert stored_value(webhook, "secret").encode() not in response.content
    assert admin_client.get("/admin/webhooks/webhook/add/").status_code == 403


def test_admin_action_resends_a_failed_delivery(
    admin_client, failed_job, receiver, django_capture_on_commit_callbacks
):
    row = WebhookDelivery.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/webhooks/webhookdelivery/",
            {"action": "resend", "_selected_action": [str(row.id)]},
            follow=True,
        )
    assert response.status_code == 200
    assert b"1 delivery(ies) queued again" in response.content
    requests = receiver.wait_for(2)
    assert requests[0].body == requests[1].body  # the same envelope, same id
    failed_job.refresh_from_db()
    assert failed_job.state == "succeeded"
    assert [(r.attempt, r.status_code) for r in WebhookDelivery.objects.order_by("created_at")] == [
        (1, 410),
        (1, 200),
    ]


def test_admin_action_skips_disabled_webhooks(admin_client, failed_job, receiver):
    failed_job.webhook.disabled_at = timezone.now()
    failed_job.webhook.save()
    response = admin_client.post(
        "/admin/webhooks/webhookdelivery/",
        {"action": "resend", "_selected_action": [str(WebhookDelivery.objects.get().id)]},
        follow=True,
    )
    assert b"1 skipped" in response.content
    assert len(receiver.requests) == 1


def test_redeliver_command_resends_failed_deliveries_of_a_range(
    failed_job, receiver, account, django_capture_on_commit_callbacks
):
    # Another failed delivery, of an event outside the range.
    old = DeliveryJob.objects.create(
        event=Event.objects.create(account=account, type="enrollment.opened", data={}),
        webhook=failed_job.webhook,
        state="failed",
        attempts=5,
        next_attempt_at=timezone.now(),
    )
    DeliveryJob.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=3))
    out = StringIO()
    since = (timezone.now() - timedelta(hours=1)).isoformat()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("webhooks_redeliver", "--since", since, stdout=out)

    assert "1 failed deliveries queued again" in out.getvalue()
    assert len(receiver.wait_for(2)) == 2
    failed_job.refresh_from_db()
    old.refresh_from_db()
    assert failed_job.state == "succeeded"
    assert old.state == "failed"


@pytest.mark.parametrize(
    "args",
    [
        ["--since", "yesterday"],
        ["--since", "2026-01-02", "--until", "2026-01-01"],
    ],
)
def test_redeliver_command_checks_its_range(args):
    with pytest.raises(CommandError):
        call_command("webhooks_redeliver", *args)


def test_prune_command_deletes_old_rows_only(failed_job, account):
    webhook = failed_job.webhook
    recent = WebhookDeliveryFactory(webhook=webhook)
    old = WebhookDeliveryFactory(webhook=webhook)
    long_ago = timezone.now() - timedelta(days=40)
    WebhookDelivery.objects.filter(pk=old.pk).update(created_at=long_ago)
    DeliveryJob.objects.filter(pk=failed_job.pk).update(created_at=long_ago)
    Event.objects.filter(pk=failed_job.event_id).update(created_at=long_ago)
    pending_event = Event.objects.create(account=account, type="enrollment.sent", data={})
    pending = DeliveryJob.objects.create(
        event=pending_event, webhook=webhook, next_attempt_at=timezone.now()
    )
    Event.objects.filter(pk=pending_event.pk).update(created_at=long_ago)
    DeliveryJob.objects.filter(pk=pending.pk).update(created_at=long_ago)

    out = StringIO()
    call_command("webhooks_prune", "--older-than-days", "30", stdout=out)

    assert "Deleted 1 attempts, 1 deliveries, 1 events." in out.getvalue()
    assert set(WebhookDelivery.objects.values_list("pk", flat=True)) >= {recent.pk}
    assert not WebhookDelivery.objects.filter(pk=old.pk).exists()
    assert not DeliveryJob.objects.filter(pk=failed_job.pk).exists()
    assert DeliveryJob.objects.filter(pk=pending.pk).exists()  # still to deliver
    assert Event.objects.filter(pk=pending_event.pk).exists()


def test_prune_command_needs_a_positive_age():
    with pytest.raises(CommandError):
        call_command("webhooks_prune", "--older-than-days", "0")
