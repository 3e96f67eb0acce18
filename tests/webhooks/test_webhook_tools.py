"""The tools of people who integrate: the event catalog, test deliveries, redelivering
one delivery and replaying failures, through the API and the admin."""

from datetime import timedelta

import pytest
from django.utils import timezone
from standardwebhooks.webhooks import Webhook as StandardWebhook

from tests.outreach.helpers import assert_error
from tests.support.event_schemas import event_problems
from tests.support.receiver import Reply
from tests.webhooks.factories import WebhookDeliveryFactory, WebhookFactory
from webhooks.catalog import EVENT_CATALOG
from webhooks.events import event_emit
from webhooks.models import EVENT_TYPES, OPT_IN_EVENT_TYPES, DeliveryJob, WebhookDelivery
from webhooks.secrets import secret_generate

# Made-up event payloads, emitted to exercise the outbox (tests/support/event_schemas.py).
pytestmark = [pytest.mark.django_db, pytest.mark.synthetic_events]


@pytest.fixture
def webhook(account, receiver):
    return WebhookFactory(account=account, url=receiver.url, secret=secret_generate())


@pytest.fixture
def failed(account, webhook, receiver, django_capture_on_commit_callbacks):
    """Emits one event whose delivery ends failed (a 410 is not retried); returns its job."""

    def make() -> DeliveryJob:
        receiver.script(Reply(410))
        with django_capture_on_commit_callbacks(execute=True):
            event = event_emit(account, "campaign.paused", {"campaign_id": "c"})
        job = DeliveryJob.objects.get(event=event)
        assert job.state == "failed"
        return job

    return make


# ---------------------------------------------------------------- the catalog


def test_event_types_list_every_type_with_a_schema(api_client, anon_client):
    response = api_client.get("/webhook_event_types")
    assert response.status_code == 200
    body = response.json()
    assert [item["type"] for item in body if not item["opt_in"]] == list(EVENT_TYPES)
    assert [item["type"] for item in body if item["opt_in"]] == list(OPT_IN_EVENT_TYPES)
    assert {
        "enrollment.clicked",
        "enrollment.branched",
        "reply.received",
        "reply.labelled",
        "credential.throttled",
        "approval.requested",
        "approval.decided",
    } == set(OPT_IN_EVENT_TYPES)
    for item in body:
        assert item["description"]
        assert item["schema"]["type"] == "object"
        assert item["schema"]["additionalProperties"] is False
    sent = body[0]["schema"]
    assert set(sent["required"]) == {
        "enrollment_id",
        "contact_id",
        "contact_email",
        "campaign_id",
        "status",
        "sent_at",
        "replied_at",
        "bounce_reason",
    }
    assert_error(anon_client.get("/webhook_event_types"), 401, "authentication_required")


@pytest.mark.parametrize("event_type", EVENT_TYPES + OPT_IN_EVENT_TYPES)
def test_each_example_matches_its_schema(event_type):
    assert event_problems(event_type, EVENT_CATALOG[event_type].example) == []


def test_the_schema_check_names_what_does_not_match():
    data = {**EVENT_CATALOG["enrollment.sent"].example, "status": "lost", "extra": 1}
    del data["contact_id"]
    problems = event_problems("enrollment.sent", data)
    assert any("'contact_id' is a required property" in p for p in problems)
    assert any(p.startswith("status: 'lost' is not one of") for p in problems)
    assert any("'extra' was unexpected" in p for p in problems)
    assert event_problems("enrollment.lost", {}) == ["'enrollment.lost' is not in the catalog"]


# ---------------------------------------------------------------- test deliveries


@pytest.fixture
def send_test(api_client, django_capture_on_commit_callbacks):
    """POST /webhooks/:id/test, then the webhooks worker's half (eager Celery, run by
    the request's commit); returns (the 202's body, the attempt as polled after)."""

    def run(webhook, event_type: str):
        with django_capture_on_commit_callbacks(execute=True) as queued:
            response = api_client.post(
                f"/webhooks/{webhook.id}/test", {"type": event_type}, format="json"
            )
        assert response.status_code == 202, response.content
        assert len(queued) == 1
        polled = api_client.get(response["Location"])
        assert polled.status_code == 200
        return response.json(), polled.json()

    return run


def test_a_test_event_is_delivered_signed_and_recorded(api_client, webhook, receiver, send_test):
    answered, body = send_test(webhook, "enrollment.replied")
    assert (answered["state"], answered["status_code"], answered["error"]) == (
        "pending",
        None,
        None,
    )
    assert (body["id"], body["state"], body["status_code"], body["error"], body["test"]) == (
        answered["id"],
        "succeeded",
        200,
        None,
        True,
    )
    assert body["attempt"] == 1 and body["duration_ms"] >= 0 and body["delivered_at"]
    (request,) = receiver.requests
    payload = StandardWebhook(webhook.secret).verify(request.body, dict(request.headers))
    assert payload["type"] == "enrollment.replied"
    assert event_problems("enrollment.replied", payload["data"]) == []
    listed = api_client.get(f"/webhooks/{webhook.id}/deliveries").json()
    assert [(d["id"], d["test"], d["event_id"]) for d in listed] == [(body["id"], True, None)]


def test_a_test_is_answered_at_once_and_made_by_the_webhooks_workers(
    api_client, webhook, receiver, settings, django_capture_on_commit_callbacks
):
    from celery import current_app

    from webhooks.operations import TEST_TASK

    receiver.hang = True  # never answers: the request must not wait for it
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.3
    with django_capture_on_commit_callbacks(execute=False) as queued:
        response = api_client.post(
            f"/webhooks/{webhook.id}/test", {"type": "enrollment.sent"}, format="json"
        )
    assert response.status_code == 202
    body = response.json()
    assert (body["state"], body["status_code"], body["error"], body["duration_ms"]) == (
        "pending",
        None,
        None,
        None,
    )
    assert response["Location"] == f"/webhooks/{webhook.id}/deliveries/{body['id']}"
    assert receiver.requests == []  # nothing was sent from the request
    assert current_app.amqp.router.route({}, TEST_TASK)["queue"].name == "webhooks"

    queued[0]()  # the worker's turn: cut off at the deadline, recorded on the same row
    polled = api_client.get(response["Location"]).json()
    assert (polled["state"], polled["status_code"]) == ("failed", None)
    assert polled["error"] == "timed out after 0.3s"
    assert len(receiver.requests) == 1


def test_a_test_the_broker_refuses_is_failed_at_once(
    api_client, webhook, receiver, monkeypatch, django_capture_on_commit_callbacks
):
    from celery import current_app

    def broker_down(*args, **kwargs):
        raise ConnectionRefusedError("broker down")

    monkeypatch.setattr(type(current_app.signature("x")), "apply_async", broker_down)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            f"/webhooks/{webhook.id}/test", {"type": "enrollment.sent"}, format="json"
        )
    polled = api_client.get(response["Location"]).json()
    assert polled["state"] == "failed"
    assert polled["error"].startswith("not sent: the webhooks queue could not be reached")
    assert receiver.requests == []


def test_a_test_whose_message_was_lost_reads_failed_after_ten_minutes(
    api_client, webhook, receiver, django_capture_on_commit_callbacks
):
    from webhooks.operations import test_delivery_make

    # The message never reaches a worker (the broker lost it): nothing runs the task.
    with django_capture_on_commit_callbacks(execute=False):
        response = api_client.post(
            f"/webhooks/{webhook.id}/test", {"type": "enrollment.sent"}, format="json"
        )
    assert api_client.get(response["Location"]).json()["state"] == "pending"
    WebhookDelivery.objects.filter(id=response.json()["id"]).update(
        created_at=timezone.now() - timedelta(minutes=11)
    )
    polled = api_client.get(response["Location"]).json()
    assert polled["state"] == "failed"
    assert polled["error"].startswith("not sent: no webhooks worker made it within 10 minutes")
    # A worker that takes the message late makes nothing: the attempt has ended.
    assert test_delivery_make(delivery_id=response.json()["id"]) is None
    assert receiver.requests == []


def test_a_delivery_of_another_webhook_is_not_found(api_client, other_client, webhook, account):
    row = WebhookDeliveryFactory(webhook=webhook)
    other = WebhookFactory(account=account)
    assert api_client.get(f"/webhooks/{webhook.id}/deliveries/{row.id}").json()["id"] == str(row.id)
    for path in (
        f"/webhooks/{other.id}/deliveries/{row.id}",
        f"/webhooks/{webhook.id}/deliveries/not-a-uuid",
    ):
        assert_error(api_client.get(path), 404, "webhook_delivery_not_found")
    assert_error(
        other_client.get(f"/webhooks/{webhook.id}/deliveries/{row.id}"), 404, "webhook_not_found"
    )


def test_a_failed_test_never_counts_toward_disabling(webhook, receiver, send_test):
    webhook.consecutive_failures = 4
    webhook.save()
    receiver.script(500)
    _, body = send_test(webhook, "campaign.paused")
    assert (body["state"], body["status_code"], body["error"], body["delivered_at"]) == (
        "failed",
        500,
        "HTTP 500",
        None,
    )
    webhook.refresh_from_db()
    assert webhook.consecutive_failures == 4 and webhook.disabled_at is None


def test_a_disabled_webhook_can_be_tested(webhook, receiver, send_test):
    webhook.disabled_at = timezone.now()
    webhook.save()
    _, body = send_test(webhook, "enrollment.sent")
    assert body["status_code"] == 200
    assert len(receiver.requests) == 1


def test_a_test_needs_a_known_type_and_the_caller_s_webhook(
    api_client, other_client, webhook, receiver
):
    body = assert_error(
        api_client.post(f"/webhooks/{webhook.id}/test", {"type": "nope"}, format="json"),
        422,
        "validation_failed",
    )
    assert "type" in body["details"]["fields"]
    assert_error(
        api_client.post(f"/webhooks/{webhook.id}/test", {}, format="json"),
        422,
        "validation_failed",
    )
    assert_error(
        other_client.post(f"/webhooks/{webhook.id}/test", {"type": "enrollment.sent"}),
        404,
        "webhook_not_found",
    )
    assert receiver.requests == []
    assert not WebhookDelivery.objects.exists()


# ---------------------------------------------------------------- redeliver


def test_redeliver_sends_the_same_envelope_again(
    api_client, webhook, receiver, failed, django_capture_on_commit_callbacks
):
    job = failed()
    row = WebhookDelivery.objects.get(job=job)
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(f"/webhooks/{webhook.id}/deliveries/{row.id}/redeliver")
    assert response.status_code == 200, response.content
    assert response.json() == {"event_id": str(job.id), "state": "pending"}
    first, second = receiver.wait_for(2)
    assert first.body == second.body
    assert second.headers["webhook-id"] == str(job.id)
    job.refresh_from_db()
    assert job.state == "succeeded"


def test_a_succeeded_delivery_can_be_redelivered(
    api_client, account, webhook, receiver, django_capture_on_commit_callbacks
):
    with django_capture_on_commit_callbacks(execute=True):
        event_emit(account, "campaign.paused", {"campaign_id": "c"})
    row = WebhookDelivery.objects.get()
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(f"/webhooks/{webhook.id}/deliveries/{row.id}/redeliver")
    assert response.status_code == 200
    assert len(receiver.wait_for(2)) == 2


def test_redeliver_refusals(api_client, other_client, webhook, receiver, failed):
    job = failed()
    row = WebhookDelivery.objects.get(job=job)
    url = f"/webhooks/{webhook.id}/deliveries/{row.id}/redeliver"
    # Under way: its next attempt is already scheduled.
    DeliveryJob.objects.filter(id=job.id).update(state="pending")
    body = assert_error(api_client.post(url), 409, "delivery_not_redeliverable")
    assert body["details"] == {"reason": "in_progress"}
    # Pruned.
    pruned = WebhookDeliveryFactory(webhook=webhook, job=None)
    body = assert_error(
        api_client.post(f"/webhooks/{webhook.id}/deliveries/{pruned.id}/redeliver"),
        409,
        "delivery_not_redeliverable",
    )
    assert body["details"] == {"reason": "pruned"}
    # A test delivery.
    test = WebhookDeliveryFactory(webhook=webhook, job=None, test=True)
    body = assert_error(
        api_client.post(f"/webhooks/{webhook.id}/deliveries/{test.id}/redeliver"),
        409,
        "delivery_not_redeliverable",
    )
    assert body["details"] == {"reason": "test"}
    # Another webhook's delivery, a malformed id, another account.
    stranger = WebhookDeliveryFactory()
    assert_error(
        api_client.post(f"/webhooks/{webhook.id}/deliveries/{stranger.id}/redeliver"),
        404,
        "webhook_delivery_not_found",
    )
    assert_error(
        api_client.post(f"/webhooks/{webhook.id}/deliveries/nope/redeliver"),
        404,
        "webhook_delivery_not_found",
    )
    assert_error(other_client.post(url), 404, "webhook_not_found")
    # Disabled.
    DeliveryJob.objects.filter(id=job.id).update(state="failed")
    webhook.disabled_at = timezone.now()
    webhook.save()
    assert_error(api_client.post(url), 409, "webhook_disabled")
    assert len(receiver.requests) == 1


# ---------------------------------------------------------------- replay


def test_replay_redelivers_the_failures_since_a_time(
    api_client, webhook, receiver, failed, django_capture_on_commit_callbacks
):
    old = failed()
    DeliveryJob.objects.filter(id=old.id).update(finished_at=timezone.now() - timedelta(days=2))
    recent = [failed(), failed()]
    since = (timezone.now() - timedelta(days=1)).isoformat()
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.post(
            f"/webhooks/{webhook.id}/replay",
            {"since": since},
            format="json",
            HTTP_IDEMPOTENCY_KEY="replay-1",
        )
    assert response.status_code == 200, response.content
    assert response.json() == {"replayed": 2, "has_more": False}
    receiver.wait_for(5)
    states = dict(DeliveryJob.objects.values_list("id", "state"))
    assert [states[job.id] for job in recent] == ["succeeded", "succeeded"]
    assert states[old.id] == "failed"
    again = api_client.post(
        f"/webhooks/{webhook.id}/replay",
        {"since": since},
        format="json",
        HTTP_IDEMPOTENCY_KEY="replay-1",
    )
    assert again.json() == {"replayed": 2, "has_more": False}
    assert again["Idempotent-Replay"] == "true"
    assert len(receiver.requests) == 5


def test_replay_refusals(api_client, other_client, webhook):
    url = f"/webhooks/{webhook.id}/replay"
    body = assert_error(api_client.post(url, {}, format="json"), 422, "validation_failed")
    assert "since" in body["details"]["fields"]
    assert_error(
        api_client.post(url, {"since": "yesterday"}, format="json"), 422, "validation_failed"
    )
    since = timezone.now().isoformat()
    assert_error(other_client.post(url, {"since": since}, format="json"), 404, "webhook_not_found")
    webhook.disabled_at = timezone.now()
    webhook.save()
    assert_error(api_client.post(url, {"since": since}, format="json"), 409, "webhook_disabled")


# ---------------------------------------------------------------- the admin


def test_admin_sends_a_test_and_replays(
    admin_client, webhook, receiver, failed, django_capture_on_commit_callbacks
):
    failed()
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/webhooks/webhook/",
            {"action": "replay_failed", "_selected_action": [str(webhook.id)]},
            follow=True,
        )
    assert b"1 delivery(ies) queued again" in response.content
    receiver.wait_for(2)
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(
            "/admin/webhooks/webhook/",
            {"action": "send_test", "_selected_action": [str(webhook.id)]},
            follow=True,
        )
    assert b"a test event is on its way" in response.content
    assert WebhookDelivery.objects.get(test=True).status_code == 200
    assert len(receiver.requests) == 3
