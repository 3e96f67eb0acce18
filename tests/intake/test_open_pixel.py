"""GET /t/o/<token>.gif: the open pixel."""

import logging

import pytest
from django.db import OperationalError, connection
from django.test import Client

from outreach.enrollments import opens, stats_read, variant_stats_read
from outreach.intake.services import enrollment_mark_opened, enrollment_mark_replied
from outreach.intake.views import PIXEL_GIF
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.webhooks.factories import WebhookFactory
from webhooks.models import DeliveryJob

pytestmark = pytest.mark.django_db


def pixel_url(enrollment_id) -> str:
    return f"/t/o/{tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment_id)}.gif"


def assert_pixel(response):
    assert response.status_code == 200
    assert response["Content-Type"] == "image/gif"
    assert "no-store" in response["Cache-Control"]
    assert response.content == PIXEL_GIF
    assert response.content.startswith(b"GIF89a")


def test_it_records_the_first_open_and_fires_enrollment_opened():
    enrollment = sent_enrollment()
    response = Client().get(pixel_url(enrollment.pk))
    assert_pixel(response)

    enrollment.refresh_from_db()
    assert enrollment.opened_at is not None
    assert enrollment.status == Enrollment.Status.SENT  # an open changes no status
    [event] = events("enrollment.opened")
    assert event.account_id == enrollment.campaign.account_id
    assert event.data == {
        "enrollment_id": str(enrollment.pk),
        "contact_id": str(enrollment.contact_id),
        "contact_email": enrollment.contact.email,
        "campaign_id": str(enrollment.campaign_id),
        "status": "sent",
        "sent_at": enrollment.sent_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "replied_at": None,
        "bounce_reason": None,
    }


@pytest.mark.django_db(transaction=True)  # autocommit, as in production
def test_it_records_repeat_opens_once_with_one_query(django_assert_num_queries):
    enrollment = sent_enrollment()
    client = Client()
    client.get(pixel_url(enrollment.pk))
    enrollment.refresh_from_db()
    first_open = enrollment.opened_at

    with django_assert_num_queries(1):  # one read, nothing written, no transaction
        assert_pixel(client.get(pixel_url(enrollment.pk)))
    enrollment.refresh_from_db()
    assert enrollment.opened_at == first_open
    assert len(events("enrollment.opened")) == 1


@pytest.mark.django_db(transaction=True)  # autocommit, as in production
def test_a_first_open_is_two_statements_its_drain_rung_among_them(
    django_assert_num_queries, monkeypatch
):
    from webhooks.tasks import webhook_drain

    enrollment = sent_enrollment()
    webhook = WebhookFactory(account=enrollment.campaign.account)
    sent = []
    monkeypatch.setattr(
        webhook_drain, "apply_async", lambda args, kwargs=None, **kw: sent.append(args)
    )
    # The read; then one statement, its own transaction: the open with what it answered,
    # the event with its delivery job and its drain's ring, the campaign's and its
    # variant's counts.
    with django_assert_num_queries(2):
        assert_pixel(Client().get(pixel_url(enrollment.pk)))
    # After the commit, the drain's message: no statement of its own.
    assert sent == [(str(webhook.pk),)]
    [event] = events("enrollment.opened")
    assert DeliveryJob.objects.get(event=event).webhook == webhook
    enrollment.refresh_from_db()
    assert enrollment.opened_on == "1A"
    assert stats_read(campaign_ids=[enrollment.campaign_id])[enrollment.campaign_id]["opened"] == 1
    [(key, variant)] = variant_stats_read(campaign_id=enrollment.campaign_id).items()
    assert (key, variant["opened"]) == ((1, "A"), 1)


def test_an_enrollment_changed_after_the_read_is_announced_as_it_is_now(monkeypatch):
    """A reply recorded between the open's read and its write: the write finds the
    enrollment changed, and the open is read again under its lock and recorded once,
    its event carrying the state after the reply."""
    enrollment = sent_enrollment()
    read = opens._read
    reads = []

    def read_then_reply(enrollment_id, sql):
        found = read(enrollment_id, sql)
        reads.append(sql)
        if len(reads) == 1:
            enrollment_mark_replied(enrollment_id=enrollment_id)
        return found

    monkeypatch.setattr(opens, "_read", read_then_reply)
    assert_pixel(Client().get(pixel_url(enrollment.pk)))
    assert reads == [opens.READ_SQL, opens.READ_LOCKED_SQL]
    [event] = events("enrollment.opened")
    enrollment.refresh_from_db()
    assert enrollment.opened_at is not None
    assert event.data["status"] == "replied" == enrollment.status
    assert event.data["replied_at"] is not None
    assert stats_read(campaign_ids=[enrollment.campaign_id])[enrollment.campaign_id]["opened"] == 1


def test_an_open_recorded_after_the_read_is_not_recorded_again(monkeypatch):
    enrollment = sent_enrollment()
    read = opens._read
    first = []

    def read_then_open(enrollment_id, sql):
        found = read(enrollment_id, sql)
        if not first:
            first.append(True)
            assert enrollment_mark_opened(enrollment_id=enrollment_id)  # another load
        return found

    monkeypatch.setattr(opens, "_read", read_then_open)
    assert enrollment_mark_opened(enrollment_id=enrollment.pk) is False
    assert len(events("enrollment.opened")) == 1
    assert stats_read(campaign_ids=[enrollment.campaign_id])[enrollment.campaign_id]["opened"] == 1
    assert variant_stats_read(campaign_id=enrollment.campaign_id)[(1, "A")]["opened"] == 1


@pytest.mark.parametrize(
    "path",
    [
        "/t/o/not-a-token.gif",
        "/t/o/{valid}x.gif",  # tampered signature
        "/t/o/{unsubscribe}.gif",  # a token for another purpose
    ],
)
def test_it_answers_the_same_gif_to_bad_tokens_and_records_nothing(path, django_assert_num_queries):
    enrollment = sent_enrollment()
    path = path.format(
        valid=tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk),
        unsubscribe=tokens.token_make(purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk),
    )
    with django_assert_num_queries(0):
        assert_pixel(Client().get(path))
    enrollment.refresh_from_db()
    assert enrollment.opened_at is None
    assert events() == []


def test_it_answers_the_gif_for_a_deleted_enrollment():
    enrollment = sent_enrollment()
    url = pixel_url(enrollment.pk)
    enrollment.delete()
    assert_pixel(Client().get(url))
    assert events() == []


def test_it_needs_no_api_key_or_csrf_and_ignores_head():
    enrollment = sent_enrollment()
    client = Client(enforce_csrf_checks=True)
    head = client.head(pixel_url(enrollment.pk))
    assert head.status_code == 200
    enrollment.refresh_from_db()
    assert enrollment.opened_at is None  # probes by scanners are not opens


def test_it_refuses_other_methods_with_the_envelope():
    enrollment = sent_enrollment()
    response = Client().post(pixel_url(enrollment.pk))
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


@pytest.mark.django_db(transaction=True)  # autocommit, as in production
def test_a_database_failure_still_serves_the_image_and_logs_it(caplog):
    enrollment = sent_enrollment()

    def database_down(execute, sql, params, many, context):
        raise OperationalError("server closed the connection unexpectedly")

    with (
        caplog.at_level(logging.ERROR, logger="outreach.intake.views"),
        connection.execute_wrapper(database_down),
    ):
        response = Client().get(pixel_url(enrollment.pk))
    assert_pixel(response)
    assert f"could not record the open of {enrollment.pk}" in caplog.text
    assert "OperationalError" in caplog.text
    enrollment.refresh_from_db()
    assert enrollment.opened_at is None  # the open is lost, the email still looks right
    assert events("enrollment.opened") == []
