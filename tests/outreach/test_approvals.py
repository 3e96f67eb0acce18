"""Approvals (docs/agents.md): a drafter key's dispatch, outreach and response are held
(202, nothing sent); an admin or sender key approves (the send runs once, checked then)
or rejects; double, concurrent and retried decisions send once; expiry."""

import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from billing.usage import usage_record_current
from outreach.approval_decisions.services import approval_decide
from outreach.approvals.services import approvals_expire
from outreach.models.approvals import Approval
from outreach.models.conversations import ReplyResponse
from outreach.models.sending import Enrollment
from tests.conftest import client_for
from tests.conversations.factories import ReplyFactory
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error
from tests.support.usage import usage_set
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Event

pytestmark = pytest.mark.django_db

APPROVAL_FIELDS = {
    "id",
    "action",
    "campaign_id",
    "contact_ids",
    "contact",
    "reply_id",
    "body_text",
    "body_html",
    "requested_by",
    "decided_by",
    "status",
    "reason",
    "outcome",
    "created_at",
    "decided_at",
    "expires_at",
}


@pytest.fixture
def drafter(account):
    return api_key_create(account=account, label="agent", role="drafter")


@pytest.fixture
def drafter_client(drafter):
    return client_for(drafter.plaintext)


@pytest.fixture
def sender_client(account):
    return client_for(api_key_create(account=account, label="person", role="sender").plaintext)


def _pending(campaign, count):
    return [
        EnrollmentFactory(campaign=campaign, contact=ContactFactory(account=campaign.account))
        for _ in range(count)
    ]


def _statuses(enrollments):
    return [Enrollment.objects.get(pk=e.pk).status for e in enrollments]


def _held_dispatch(client, campaign):
    response = client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.status_code == 202, response.content
    return response.json()


def test_a_drafters_dispatch_is_held_and_an_approval_runs_it_once(
    account, drafter, drafter_client, sender_client
):
    campaign = CampaignFactory(account=account)
    enrollments = _pending(campaign, 2)
    held = _held_dispatch(drafter_client, campaign)
    assert set(held) == APPROVAL_FIELDS
    assert held["action"] == "dispatch"
    assert held["status"] == "pending"
    assert held["campaign_id"] == str(campaign.pk)
    assert held["contact_ids"] is None
    assert held["requested_by"] == {
        "api_key_id": str(drafter.api_key.pk),
        "prefix": drafter.api_key.prefix,
    }
    assert _statuses(enrollments) == ["pending", "pending"]

    approved = sender_client.post(f"/approvals/{held['id']}/approve")
    assert approved.status_code == 200, approved.content
    body = approved.json()
    assert body["status"] == "approved"
    assert body["outcome"] == {"dispatched": 2}
    assert body["decided_by"]["prefix"] != drafter.api_key.prefix
    assert _statuses(enrollments) == ["scheduled", "scheduled"]

    again = sender_client.post(f"/approvals/{held['id']}/approve")
    assert assert_error(again, 409, "approval_not_pending")["details"] == {"status": "approved"}
    rejected = sender_client.post(f"/approvals/{held['id']}/reject", {}, format="json")
    assert_error(rejected, 409, "approval_not_pending")


def test_a_rejection_sends_nothing(account, drafter_client, sender_client):
    campaign = CampaignFactory(account=account)
    enrollments = _pending(campaign, 1)
    held = _held_dispatch(drafter_client, campaign)
    response = sender_client.post(
        f"/approvals/{held['id']}/reject", {"reason": "Not this week."}, format="json"
    )
    assert response.json()["status"] == "rejected"
    assert response.json()["reason"] == "Not this week."
    assert_error(
        sender_client.post(f"/approvals/{held['id']}/approve"), 409, "approval_not_pending"
    )
    assert _statuses(enrollments) == ["pending"]


def test_who_may_decide(account, api_client, drafter_client, sender_client):
    campaign = CampaignFactory(account=account)
    _pending(campaign, 1)
    held = _held_dispatch(drafter_client, campaign)
    reader = client_for(api_key_create(account=account, label="r", role="reader").plaintext)
    for client in (drafter_client, reader):
        body = assert_error(
            client.post(f"/approvals/{held['id']}/approve"), 403, "insufficient_role"
        )
        assert body["details"]["required"] == "sender"
        assert client.get(f"/approvals/{held['id']}").json()["status"] == "pending"
    assert api_client.post(f"/approvals/{held['id']}/approve").json()["status"] == "approved"


def test_a_drafters_outreach_and_response_are_held_then_run(account, drafter_client, sender_client):
    campaign = CampaignFactory(account=account)
    outreach = drafter_client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "new@example.org"}},
        format="json",
    )
    assert outreach.status_code == 202, outreach.content
    assert outreach.json()["contact"] == {"email": "new@example.org"}
    assert not Enrollment.objects.filter(contact__email="new@example.org").exists()
    body = sender_client.post(f"/approvals/{outreach.json()['id']}/approve").json()
    assert body["status"] == "approved"
    enrollment = Enrollment.objects.get(contact__email="new@example.org")
    assert body["outcome"] == {"enrollment_id": str(enrollment.pk), "changed": True}

    reply = ReplyFactory(message__enrollment__campaign=campaign)
    held = drafter_client.post(
        f"/replies/{reply.pk}/respond", {"body_text": "Tuesday?"}, format="json"
    )
    assert held.status_code == 202, held.content
    assert (held.json()["reply_id"], held.json()["body_text"]) == (str(reply.pk), "Tuesday?")
    assert held.json()["contact_ids"] == [str(reply.contact_id)]
    assert not ReplyResponse.objects.exists()
    body = sender_client.post(f"/approvals/{held.json()['id']}/approve").json()
    assert body["status"] == "approved"
    response = ReplyResponse.objects.get()
    assert body["outcome"] == {"response_id": str(response.pk)}
    assert response.body_text == "Tuesday?"


def test_what_refuses_the_send_then_makes_it_failed(account, drafter_client, sender_client):
    campaign = CampaignFactory(account=account)
    enrollments = _pending(campaign, 1)
    held = _held_dispatch(drafter_client, campaign)
    usage_set(usage_record_current(account=account), account.plan.monthly_limit)
    body = sender_client.post(f"/approvals/{held['id']}/approve").json()
    assert body["status"] == "failed"
    assert body["outcome"]["code"] == "plan_limit_reached"
    assert _statuses(enrollments) == ["pending"]


def test_the_drafters_limit_is_checked_when_asked_and_when_approved(account, sender_client):
    key = api_key_create(account=account, label="agent", role="drafter", daily_send_limit=1)
    client = client_for(key.plaintext)
    campaign = CampaignFactory(account=account)
    asked = [
        client.post(
            "/outreaches",
            {"campaign_id": str(campaign.pk), "contact": {"email": f"n{n}@example.org"}},
            format="json",
        ).json()
        for n in range(2)
    ]
    assert [a["status"] for a in asked] == ["pending", "pending"]
    first = sender_client.post(f"/approvals/{asked[0]['id']}/approve").json()
    second = sender_client.post(f"/approvals/{asked[1]['id']}/approve").json()
    assert first["status"] == "approved"
    assert second["status"] == "failed"
    assert second["outcome"]["code"] == "key_send_limit_reached"
    assert second["outcome"]["details"]["used"] == 1
    # Asked again now: refused at once, no approval made.
    refused = client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "n9@example.org"}},
        format="json",
    )
    assert_error(refused, 403, "key_send_limit_reached")
    assert Approval.objects.count() == 2


def test_a_revoked_drafters_approvals_fail(account, api_client, drafter, drafter_client):
    campaign = CampaignFactory(account=account)
    enrollments = _pending(campaign, 1)
    held = _held_dispatch(drafter_client, campaign)
    assert api_client.delete(f"/api_keys/{drafter.api_key.pk}").status_code == 204
    body = api_client.post(f"/approvals/{held['id']}/approve").json()
    assert (body["status"], body["outcome"]["code"]) == ("failed", "requester_inactive")
    assert _statuses(enrollments) == ["pending"]


def test_a_retried_approve_replays_and_sends_once(account, drafter_client, sender_client):
    campaign = CampaignFactory(account=account)
    _pending(campaign, 3)
    held = _held_dispatch(drafter_client, campaign)
    url = f"/approvals/{held['id']}/approve"
    first = sender_client.post(url, HTTP_IDEMPOTENCY_KEY="approve-1")
    second = sender_client.post(url, HTTP_IDEMPOTENCY_KEY="approve-1")
    assert first.json() == second.json()
    assert second["Idempotent-Replay"] == "true"
    assert Enrollment.objects.filter(status="scheduled").count() == 3


def test_two_concurrent_approvals_send_once(live_db):
    campaign = CampaignFactory()
    account = campaign.account
    drafter = api_key_create(account=account, label="agent", role="drafter").api_key
    deciders = [api_key_create(account=account, label=f"p{i}").api_key for i in range(2)]
    _pending(campaign, 2)
    approval = Approval.objects.create(
        account=account,
        action="dispatch",
        campaign_id=campaign.pk,
        requested_by=drafter,
        created_at=timezone.now(),
        expires_at=timezone.now() + timedelta(hours=1),
    )
    barrier = threading.Barrier(2)
    results: list[str] = []

    def decide(decider: ApiKey):
        try:
            barrier.wait()
            done = approval_decide(
                account=account, approval_id=approval.pk, decider=decider, approve=True
            )
            results.append(f"{done.status} {done.outcome['dispatched']}")
        except Exception as exc:
            results.append(getattr(exc, "code", repr(exc)))
        finally:
            connection.close()

    threads = [threading.Thread(target=decide, args=(d,)) for d in deciders]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == ["approval_not_pending", "approved 2"]
    assert Enrollment.objects.filter(status="scheduled").count() == 2


def test_expiry_is_safe_to_run_twice_and_refuses_late_decisions(
    account, drafter_client, sender_client
):
    campaign = CampaignFactory(account=account)
    enrollments = _pending(campaign, 1)
    late = _held_dispatch(drafter_client, campaign)
    fresh = _held_dispatch(drafter_client, campaign)
    Approval.objects.filter(pk=late["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    # Past its time, before beat marked it: already refused.
    body = assert_error(
        sender_client.post(f"/approvals/{late['id']}/approve"), 409, "approval_not_pending"
    )
    assert body["details"] == {"status": "expired"}
    assert approvals_expire() == 1
    assert approvals_expire() == 0
    assert Approval.objects.get(pk=late["id"]).status == "expired"
    assert Approval.objects.get(pk=fresh["id"]).status == "pending"
    assert _statuses(enrollments) == ["pending"]


def test_the_list_filters_pages_and_is_the_accounts(
    account, drafter_client, sender_client, other_client
):
    campaign = CampaignFactory(account=account)
    _pending(campaign, 1)
    held = [_held_dispatch(drafter_client, campaign) for _ in range(3)]
    sender_client.post(f"/approvals/{held[0]['id']}/reject", {}, format="json")
    pending = sender_client.get("/approvals?status=pending").json()
    assert [a["id"] for a in pending] == [held[2]["id"], held[1]["id"]]
    first_page = sender_client.get("/approvals?limit=1")
    assert first_page.json()[0]["id"] == held[2]["id"]
    assert 'rel="next"' in first_page["Link"]
    assert other_client.get("/approvals").json() == []
    assert_error(other_client.get(f"/approvals/{held[1]['id']}"), 404, "approval_not_found")
    assert_error(
        other_client.post(f"/approvals/{held[1]['id']}/approve"), 404, "approval_not_found"
    )
    body = assert_error(sender_client.get("/approvals?status=maybe"), 422, "validation_failed")
    assert "status" in body["details"]["fields"]
    body = assert_error(sender_client.get("/approvals?colour=red"), 422, "validation_failed")
    assert "colour" in body["details"]["fields"]
    body = assert_error(
        sender_client.post(f"/approvals/{held[1]['id']}/reject", {"why": "x"}, format="json"),
        422,
        "validation_failed",
    )
    assert "why" in body["details"]["fields"]
    assert Approval.objects.get(pk=held[1]["id"]).status == "pending"


def test_opt_in_events_carry_the_approval(account, drafter_client, sender_client):
    WebhookFactory(account=account, event_filters=["approval.requested", "approval.decided"])
    campaign = CampaignFactory(account=account)
    _pending(campaign, 1)
    held = _held_dispatch(drafter_client, campaign)
    decided = sender_client.post(f"/approvals/{held['id']}/approve").json()
    events = {e.type: e.data for e in Event.objects.filter(account=account)}
    assert events["approval.requested"] == held
    assert events["approval.decided"] == decided


def test_no_event_without_a_webhook_that_asks(account, drafter_client):
    WebhookFactory(account=account)  # "*" does not cover opt-in types
    campaign = CampaignFactory(account=account)
    _pending(campaign, 1)
    _held_dispatch(drafter_client, campaign)
    assert not Event.objects.filter(type__startswith="approval.").exists()


def test_the_list_costs_the_same_whatever_its_length(
    account, drafter_client, sender_client, django_assert_max_num_queries, auth_queries
):
    campaign = CampaignFactory(account=account)
    _pending(campaign, 1)
    for _ in range(2):
        _held_dispatch(drafter_client, campaign)
    with django_assert_max_num_queries(auth_queries + 1):
        assert len(sender_client.get("/approvals").json()) == 2
    for _ in range(5):
        _held_dispatch(drafter_client, campaign)
    with django_assert_max_num_queries(auth_queries + 1):
        assert len(sender_client.get("/approvals").json()) == 7
