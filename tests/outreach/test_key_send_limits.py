"""A key's daily_send_limit (docs/accounts.md, "Daily send limits"): dispatch, outreach
and respond count against it; a request that would pass it is refused whole; two
concurrent dispatches cannot both pass it."""

import threading
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection

from accounts.models import KeySendCount
from accounts.services import api_key_create
from outreach.campaigns.dispatch import campaign_dispatch
from outreach.models.sending import Enrollment
from tests.conftest import client_for
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


def _pending(campaign, count):
    return [
        EnrollmentFactory(campaign=campaign, contact=ContactFactory(account=campaign.account))
        for _ in range(count)
    ]


@pytest.fixture
def limited(account):
    return api_key_create(account=account, label="agent", role="sender", daily_send_limit=3)


def test_a_dispatch_within_the_limit_counts(account, limited):
    client = client_for(limited.plaintext)
    campaign = CampaignFactory(account=account)
    _pending(campaign, 2)
    response = client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    assert response.json()["dispatched"] == 2
    assert KeySendCount.objects.get(api_key=limited.api_key).count == 2


def test_a_dispatch_past_the_limit_is_refused_whole(account, limited):
    client = client_for(limited.plaintext)
    campaign = CampaignFactory(account=account)
    first = _pending(campaign, 2)
    client.post(
        f"/campaigns/{campaign.pk}/dispatch",
        {"contact_ids": [str(first[0].contact_id)]},
        format="json",
    )
    more = _pending(campaign, 2)
    response = client.post(
        f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
    )
    body = assert_error(response, 403, "key_send_limit_reached")
    assert body["details"]["limit"] == 3
    assert body["details"]["used"] == 1
    resets_at = datetime.fromisoformat(body["details"]["resets_at"])
    assert (resets_at.hour, resets_at.minute, resets_at.tzinfo) == (0, 0, UTC)
    assert timedelta(0) < resets_at - datetime.now(UTC) <= timedelta(days=1)
    for enrollment in [first[1], *more]:
        enrollment.refresh_from_db()
        assert enrollment.status == Enrollment.Status.PENDING
    assert KeySendCount.objects.get(api_key=limited.api_key).count == 1


def test_keys_without_a_limit_count_nothing(api_client, account):
    campaign = CampaignFactory(account=account)
    _pending(campaign, 4)
    assert (
        api_client.post(
            f"/campaigns/{campaign.pk}/dispatch", {"all_pending": True}, format="json"
        ).json()["dispatched"]
        == 4
    )
    assert not KeySendCount.objects.exists()


def test_outreaches_count_one_each_and_stop_at_the_limit(account):
    key = api_key_create(account=account, label="agent", role="sender", daily_send_limit=2)
    client = client_for(key.plaintext)
    campaign = CampaignFactory(account=account)
    answers = [
        client.post(
            "/outreaches",
            {"campaign_id": str(campaign.pk), "contact": {"email": f"p{n}@example.org"}},
            format="json",
        )
        for n in range(3)
    ]
    assert [a.status_code for a in answers] == [201, 201, 403]
    assert answers[2].json()["code"] == "key_send_limit_reached"
    assert answers[2].json()["details"]["used"] == 2
    assert not Enrollment.objects.filter(contact__email="p2@example.org").exists()
    # The same contact again changes nothing, and counts nothing.
    again = client.post(
        "/outreaches",
        {"campaign_id": str(campaign.pk), "contact": {"email": "p0@example.org"}},
        format="json",
    )
    assert again.status_code == 200


def test_two_concurrent_dispatches_cannot_both_pass_the_limit(live_db):
    key = api_key_create(
        account=CampaignFactory().account, label="agent", daily_send_limit=3
    ).api_key
    campaigns = [CampaignFactory(account=key.account) for _ in range(2)]
    for campaign in campaigns:
        _pending(campaign, 2)
    barrier = threading.Barrier(2)
    results: dict[int, object] = {}

    def dispatch(index):
        try:
            barrier.wait()
            results[index] = campaign_dispatch(campaign=campaigns[index], api_key=key)
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=dispatch, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    outcomes = sorted(
        type(r).__name__ if isinstance(r, Exception) else str(r) for r in results.values()
    )
    assert outcomes == ["2", "KeySendLimitReached"]
    assert KeySendCount.objects.get(api_key=key).count == 2
    scheduled = Enrollment.objects.filter(status=Enrollment.Status.SCHEDULED).count()
    assert scheduled == 2


def test_responses_count_one_each_and_stop_at_the_limit(account):
    from outreach.models.conversations import ReplyResponse
    from tests.conversations.factories import ReplyFactory

    key = api_key_create(account=account, label="agent", role="sender", daily_send_limit=1)
    client = client_for(key.plaintext)
    campaign = CampaignFactory(account=account)
    replies = [ReplyFactory(message__enrollment__campaign=campaign) for _ in range(2)]
    first = client.post(f"/replies/{replies[0].pk}/respond", {"body_text": "Yes."}, format="json")
    second = client.post(f"/replies/{replies[1].pk}/respond", {"body_text": "No."}, format="json")
    assert first.status_code == 201, first.content
    body = assert_error(second, 403, "key_send_limit_reached")
    assert (body["details"]["limit"], body["details"]["used"]) == (1, 1)
    assert list(ReplyResponse.objects.values_list("body_text", flat=True)) == ["Yes."]
