"""/replies and the thread of an enrollment: what an API user reads and changes."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from tests.conversations.reply_rows import reply_for, response_to
from tests.intake.factories import first_message, sent_enrollment
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def enrollment(account):
    return sent_enrollment(account=account, steps_sent=2)


def test_a_reply_shows_every_field_of_the_contract(api_client, enrollment):
    reply = reply_for(
        enrollment,
        attachments=[{"filename": "deck.pdf", "content_type": "application/pdf", "size": 1200}],
        label="out_of_office",
        label_source="auto",
        returns_on=timezone.now().date() + timedelta(days=3),
    )
    response = api_client.get(f"/replies/{reply.pk}")
    assert response.status_code == 200, response.content
    body = response.json()
    assert set(body) == {
        "id",
        "enrollment_id",
        "campaign_id",
        "contact_id",
        "credential_id",
        "from_email",
        "from_name",
        "to",
        "cc",
        "subject",
        "received_at",
        "message_id",
        "in_reply_to",
        "text",
        "new_text",
        "html",
        "truncated",
        "attachments",
        "label",
        "label_source",
        "sender_verified",
        "returns_on",
        "read",
        "rule_outcomes",
        "body_purged_at",
        "created_at",
    }
    assert body["enrollment_id"] == str(enrollment.pk)
    assert body["campaign_id"] == str(enrollment.campaign_id)
    assert body["contact_id"] == str(enrollment.contact_id)
    assert body["credential_id"] == str(enrollment.credential_id)
    assert body["new_text"] == "Sounds good."
    assert body["attachments"] == [
        {"filename": "deck.pdf", "content_type": "application/pdf", "size": 1200}
    ]
    assert body["label"] == "out_of_office" and body["label_source"] == "auto"
    assert body["returns_on"] == reply.returns_on.isoformat()
    assert body["read"] is False and body["truncated"] is False
    assert body["received_at"].endswith("Z")
    assert body["cc"] == [] and body["body_purged_at"] is None
    assert body["sender_verified"] is True


def test_the_list_is_newest_first_with_cursor_pages(api_client, enrollment):
    replies = [reply_for(enrollment) for _ in range(3)]
    first = api_client.get("/replies?limit=2")
    assert first.status_code == 200
    assert [r["id"] for r in first.json()] == [str(replies[2].pk), str(replies[1].pk)]
    assert 'rel="next"' in first["Link"]
    second = api_client.get(f"/replies?limit=2&starting_after={replies[1].pk}")
    assert [r["id"] for r in second.json()] == [str(replies[0].pk)]
    assert "Link" not in second


def test_the_list_filters(api_client, account, enrollment):
    other = sent_enrollment(account=account)
    old = reply_for(enrollment, received_at=timezone.now() - timedelta(days=2), read=True)
    labelled = reply_for(enrollment, label="interested", label_source="manual")
    elsewhere = reply_for(other)

    def ids(query):
        response = api_client.get(f"/replies?{query}")
        assert response.status_code == 200, response.content
        return {r["id"] for r in response.json()}

    assert ids(f"campaign_id={other.campaign_id}") == {str(elsewhere.pk)}
    assert ids(f"enrollment_id={enrollment.pk}") == {str(old.pk), str(labelled.pk)}
    assert ids(f"credential_id={other.credential_id}") == {str(elsewhere.pk)}
    assert ids("label=interested") == {str(labelled.pk)}
    assert ids("read=true") == {str(old.pk)}
    assert ids("read=false") == {str(labelled.pk), str(elsewhere.pk)}
    after = (timezone.now() - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert ids(f"received_after={after}") == {str(labelled.pk), str(elsewhere.pk)}


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("campaign_id=nope", "campaign_id"),
        ("credential_id=1", "credential_id"),
        ("enrollment_id=x", "enrollment_id"),
        ("label=happy", "label"),
        ("read=1", "read"),
        ("read=yes", "read"),
        ("received_after=yesterday", "received_after"),
        ("limit=0", "limit"),
        ("starting_after=00000000-0000-0000-0000-000000000000", "starting_after"),
    ],
)
def test_bad_filters_are_refused_naming_the_parameter(api_client, enrollment, query, field):
    reply_for(enrollment)
    assert_fields(api_client.get(f"/replies?{query}"), field)


def test_another_accounts_replies_are_invisible(api_client, other_client, enrollment):
    reply = reply_for(enrollment)
    assert other_client.get("/replies").json() == []
    assert_error(other_client.get(f"/replies/{reply.pk}"), 404, "reply_not_found")
    assert_error(
        other_client.patch(f"/replies/{reply.pk}", {"read": True}, format="json"),
        404,
        "reply_not_found",
    )
    assert_error(api_client.get("/replies/not-a-uuid"), 404, "reply_not_found")
    reply.refresh_from_db()
    assert reply.read is False


def test_patch_marks_read_and_labels_manually(api_client, enrollment):
    reply = reply_for(enrollment, label="auto_reply", label_source="auto")
    response = api_client.patch(
        f"/replies/{reply.pk}", {"read": True, "label": "interested"}, format="json"
    )
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["read"] is True
    assert body["label"] == "interested" and body["label_source"] == "manual"
    reply.refresh_from_db()
    assert (reply.read, reply.label, reply.label_source) == (True, "interested", "manual")

    cleared = api_client.patch(f"/replies/{reply.pk}", {"label": None}, format="json").json()
    assert cleared["label"] is None and cleared["label_source"] is None
    assert cleared["read"] is True  # untouched


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"label": "happy"}, "label"),
        ({"read": "yes"}, "read"),
        ({"read": 1}, "read"),
        ({"label": 3}, "label"),
    ],
)
def test_bad_patches_change_nothing(api_client, enrollment, body, field):
    reply = reply_for(enrollment)
    assert_fields(api_client.patch(f"/replies/{reply.pk}", body, format="json"), field)
    reply.refresh_from_db()
    assert (reply.read, reply.label) == (False, "")


def test_the_list_costs_the_same_queries_for_one_or_fifty(api_client, enrollment):
    reply_for(enrollment)
    api_client.get("/replies")  # warm the page's shape
    with CaptureQueriesContext(connection) as one:
        api_client.get("/replies")
    for _ in range(49):
        reply_for(enrollment)
    with CaptureQueriesContext(connection) as fifty:
        assert len(api_client.get("/replies").json()) == 50
    assert len(fifty) == len(one)


def test_the_thread_lists_steps_replies_and_responses_in_time_order(api_client, enrollment):
    step1, step2 = enrollment.messages.order_by("step")
    step1.text = "Hi Ada, step one."
    step1.save()
    now = timezone.now()
    reply = reply_for(enrollment, received_at=step2.sent_at + timedelta(minutes=5))
    answer = response_to(reply, message_id="answer@sender.example", sent_at=now)
    url = f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/thread"
    with CaptureQueriesContext(connection) as queries:
        response = api_client.get(url)
    assert response.status_code == 200, response.content
    entries = response.json()
    assert [e["type"] for e in entries] == ["step", "step", "reply", "response"]
    assert entries[0]["step"] == {
        "message_id": step1.message_id,
        "step": 1,
        "key": step1.step_key,
        "variant": "A",
        "subject": step1.subject,
        "text": "Hi Ada, step one.",
        "to": step1.to_email,
        "sent_at": entries[0]["at"],
        "attempt": None,  # a message recorded without its attempt
    }
    assert entries[0]["reply"] is None and entries[0]["response"] is None
    assert entries[0]["attempt"] is None
    assert entries[2]["reply"]["id"] == str(reply.pk)
    assert entries[3]["response"]["id"] == str(answer.pk)
    assert entries[3]["response"]["text"] == "Great, Tuesday?"
    assert entries[3]["response"]["status"] == "sent"
    assert len(queries) < 13  # auth, the campaign, the enrollment, four lists


def test_the_thread_is_scoped_to_the_campaign_and_account(api_client, other_client, enrollment):
    url = f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/thread"
    assert_error(other_client.get(url), 404, "campaign_not_found")
    other = sent_enrollment(account=enrollment.campaign.account)
    wrong = f"/campaigns/{other.campaign_id}/enrollments/{enrollment.pk}/thread"
    assert_error(api_client.get(wrong), 404, "enrollment_not_found")
    assert first_message(enrollment) is not None


def test_patch_refuses_unknown_fields_and_takes_the_reply_sent_back(api_client, enrollment):
    reply = reply_for(enrollment)
    assert_fields(
        api_client.patch(f"/replies/{reply.pk}", {"lable": "interested"}, format="json"), "lable"
    )
    read_back = api_client.get(f"/replies/{reply.pk}").json()
    response = api_client.patch(
        f"/replies/{reply.pk}", {**read_back, "read": True, "label": "interested"}, format="json"
    )
    assert response.status_code == 200, response.content
    assert (response.json()["read"], response.json()["label"]) == (True, "interested")


def test_the_list_reads_only_its_own_query_parameters(api_client, enrollment):
    reply = reply_for(enrollment)
    response = api_client.get("/replies?limit=1&utm_source=x")
    assert response.status_code == 200
    assert [r["id"] for r in response.json()] == [str(reply.pk)]
