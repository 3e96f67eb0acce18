"""/contacts: CRUD, filters, cursor pagination, case-insensitive uniqueness."""

import pytest
from django.utils import timezone

from outreach.models.contacts import Contact
from tests.outreach.factories import ContactFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


def test_it_creates_a_contact(api_client):
    response = api_client.post(
        "/contacts",
        {
            "email": "Ada@Example.ORG",
            "first_name": "Ada",
            "last_name": "Lovelace",
            "company": "Engines",
            "fields": {"job_title": "Countess"},
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["email"] == "Ada@example.org"  # domain normalised, local part kept
    assert body["fields"] == {"job_title": "Countess"}
    assert body["unsubscribed_at"] is None and body["bounced_at"] is None
    assert set(body) == {
        "id",
        "created_at",
        "email",
        "first_name",
        "last_name",
        "company",
        "fields",
        "timezone",
        "unsubscribed_at",
        "bounced_at",
    }
    assert body["timezone"] is None


def test_email_is_unique_case_insensitively(api_client):
    api_client.post("/contacts", {"email": "ada@example.org"}, format="json")
    response = api_client.post("/contacts", {"email": "ADA@example.org"}, format="json")
    fields = assert_fields(response, "email")
    assert fields["email"] == ["A contact with this email already exists."]
    assert Contact.objects.count() == 1


def test_same_email_in_two_accounts_is_fine(api_client, other_client):
    assert (
        api_client.post("/contacts", {"email": "a@example.org"}, format="json").status_code == 201
    )
    assert (
        other_client.post("/contacts", {"email": "a@example.org"}, format="json").status_code == 201
    )


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"email"}),
        ({"email": "nope"}, {"email"}),
        ({"email": "a@b.example", "fields": ["x"]}, {"fields"}),
        ({"email": "a@b.example", "fields": {"n": 1}}, {"fields"}),
        ({"email": "a@b.example", "fields": {"bad key": "x"}}, {"fields"}),
        ({"email": "a@b.example", "first_name": "x" * 201}, {"first_name"}),
    ],
)
def test_invalid_contacts(api_client, body, fields):
    assert_fields(api_client.post("/contacts", body, format="json"), *fields)


def test_patch_updates_and_checks_duplicates(api_client, account):
    ada = ContactFactory(account=account, email="ada@example.org")
    ContactFactory(account=account, email="bob@example.org")
    response = api_client.patch(
        f"/contacts/{ada.pk}", {"first_name": "Augusta", "fields": {"a": "1"}}, format="json"
    )
    assert response.status_code == 200
    assert response.json()["first_name"] == "Augusta"
    assert response.json()["fields"] == {"a": "1"}
    assert_fields(
        api_client.patch(f"/contacts/{ada.pk}", {"email": "BOB@example.org"}, format="json"),
        "email",
    )
    ok = api_client.patch(f"/contacts/{ada.pk}", {"email": "ADA@example.org"}, format="json")
    assert ok.status_code == 200 and ok.json()["email"] == "ADA@example.org"


def test_suppression_timestamps_are_read_only(api_client, account):
    contact = ContactFactory(account=account)
    response = api_client.patch(
        f"/contacts/{contact.pk}",
        {"unsubscribed_at": "2026-01-01T00:00:00Z", "bounced_at": None},
        format="json",
    )
    # Changed: refused (config.api.serializers); sent back unchanged (null): accepted.
    assert response.status_code == 422
    assert response.json()["details"]["fields"] == {
        "unsubscribed_at": ["Read-only field: it cannot be changed."]
    }
    contact.refresh_from_db()
    assert contact.unsubscribed_at is None and contact.bounced_at is None


def test_filters(api_client, account):
    now = timezone.now()
    plain = ContactFactory(account=account, email="plain@example.org")
    unsub = ContactFactory(account=account, unsubscribed_at=now)
    bounced = ContactFactory(account=account, bounced_at=now)

    def ids(query):
        response = api_client.get(f"/contacts?{query}")
        assert response.status_code == 200, response.content
        return {c["id"] for c in response.json()}

    assert ids("email=PLAIN@example.org") == {str(plain.pk)}
    assert ids("unsubscribed=true") == {str(unsub.pk)}
    assert ids("unsubscribed=false") == {str(plain.pk), str(bounced.pk)}
    assert ids("bounced=true") == {str(bounced.pk)}
    assert ids("bounced=false&unsubscribed=false") == {str(plain.pk)}
    assert_fields(api_client.get("/contacts?bounced=maybe"), "bounced")


def test_cursor_pagination(api_client, account):
    contacts = [ContactFactory(account=account) for _ in range(5)]
    seen = []
    url = "/contacts?limit=2"
    while url:
        response = api_client.get(url)
        seen += [c["id"] for c in response.json()]
        link = response.get("Link")
        url = link[1 : link.index(">")].replace("http://testserver", "") if link else None
    assert seen == [str(c.pk) for c in reversed(contacts)]
    assert_fields(api_client.get("/contacts?limit=0"), "limit")
    assert_fields(api_client.get("/contacts?starting_after=nope"), "starting_after")


@pytest.mark.parametrize("count", [5, 60])
def test_list_query_count_is_bounded(
    api_client, account, count, django_assert_max_num_queries, auth_queries
):
    for _ in range(count):
        ContactFactory(account=account)
    with django_assert_max_num_queries(auth_queries + 1):
        response = api_client.get("/contacts?limit=1000")
    assert len(response.json()) == count


def test_delete(api_client, account):
    contact = ContactFactory(account=account)
    response = api_client.delete(f"/contacts/{contact.pk}")
    assert response.status_code == 204 and response.content == b""
    assert_error(api_client.get(f"/contacts/{contact.pk}"), 404, "contact_not_found")
