"""Keyset pages from the kept statement of their shape are the pages the ORM builds."""

from datetime import timedelta

import pytest
from django.db.models import Count, Q
from django.forms.models import model_to_dict
from django.utils import timezone

from accounts.models import ApiKey
from accounts.services import api_key_create
from config.api import pagination
from config.api.pagination import _keyset, _shape, page_fetch
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment
from tests.outreach.factories import ContactFactory

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def no_kept_statements():
    pagination._statements.clear()
    yield
    pagination._statements.clear()


def _rows(objects) -> list[dict]:
    return [{"pk": o.pk, **model_to_dict(o), **{"created_at": o.created_at}} for o in objects]


@pytest.fixture
def contacts(account):
    base = timezone.now()
    made = [
        ContactFactory(
            account=account,
            email=f"c{n}@example.org",
            fields={"n": n, "tags": ["a", "b"]},
            unsubscribed_at=base if n % 3 == 0 else None,
        )
        for n in range(7)
    ]
    # Two share a creation time, so the id decides between them.
    Contact.objects.filter(pk__in=[made[2].pk, made[3].pk]).update(created_at=base)
    for n, contact in enumerate(made):
        if n not in (2, 3):
            Contact.objects.filter(pk=contact.pk).update(created_at=base + timedelta(seconds=n))
    ContactFactory()  # another account's
    return made


@pytest.mark.parametrize("size", [1, 3, 10])
def test_contact_pages_match_the_orm_from_the_first_page_to_the_last(account, contacts, size):
    queryset = Contact.objects.filter(account=account)
    anchor, seen = None, []
    for _ in range(10):
        expected = list(_keyset(queryset, anchor)[:size])
        first = page_fetch(queryset, anchor, size)  # the ORM, keeping the statement
        again = page_fetch(queryset, anchor, size)  # the kept statement
        assert _rows(first) == _rows(again) == _rows(expected)
        assert all(type(o) is Contact and not o._state.adding for o in again)
        seen += [o.pk for o in again]
        if len(again) < size:
            break
        anchor = {"created_at": again[-1].created_at, "pk": again[-1].pk}
    assert sorted(seen) == sorted(c.pk for c in contacts)
    assert pagination._statements and None not in pagination._statements.values()


def test_an_exact_filter_is_part_of_the_shape(account, contacts):
    wanted = Contact.objects.filter(account=account, email_lower="c4@example.org")
    other = Contact.objects.filter(account=account, email_lower="c5@example.org")
    page_fetch(wanted, None, 5)
    assert [c.email for c in page_fetch(wanted, None, 5)] == ["c4@example.org"]
    assert [c.email for c in page_fetch(other, None, 5)] == ["c5@example.org"]


def test_api_keys_and_the_query_count(account, django_assert_num_queries):
    keys = [api_key_create(account=account, label=f"k{n}").api_key for n in range(3)]
    ApiKey.objects.filter(pk=keys[0].pk).update(revoked_at=timezone.now())
    queryset = ApiKey.objects.filter(account=account)
    page_fetch(queryset, None, 10)
    with django_assert_num_queries(1):
        page = page_fetch(queryset, None, 10)
    assert _rows(page) == _rows(_keyset(queryset, None)[:10])
    assert page[-1].revoked_at is not None


@pytest.mark.parametrize(
    "build",
    [
        lambda a: Contact.objects.filter(account=a, unsubscribed_at__isnull=True),
        lambda a: Contact.objects.filter(account=a, email_lower__in=["x@example.org"]),
        lambda a: Contact.objects.filter(Q(account=a) | Q(email_lower="x@example.org")),
        lambda a: Contact.objects.filter(account=a).exclude(company="Acme"),
        lambda a: Contact.objects.filter(account=a).defer("fields"),
        lambda a: Contact.objects.filter(account=a).annotate(n=Count("enrollments")),
        lambda a: Contact.objects.filter(account=a, account__email="x@example.org"),
        lambda a: Enrollment.objects.filter(campaign__account=a).select_related("contact"),
        lambda a: Contact.objects.filter(account=a).values_list("pk", flat=True),
    ],
)
def test_other_shapes_always_go_through_the_orm(account, contacts, build):
    queryset = build(account)
    assert _shape(queryset, False, 5) == (None, [])
    page_fetch(queryset, None, 5)
    assert pagination._statements == {}


# --- a list that shows more than its model's columns (extend) -------------------------


def test_annotated_pages_match_the_orm_and_take_one_query(account, django_assert_num_queries):
    """Campaigns with their stats, steps and mailboxes (selectors.campaigns_with_relations):
    compiled once, then the kept statement, page by page, equal to the ORM's."""
    from outreach import enrollments
    from outreach.campaigns import selectors
    from outreach.models.campaigns import Campaign
    from tests.outreach.factories import CampaignFactory

    base = timezone.now()
    made = [CampaignFactory(account=account, with_steps=n % 3) for n in range(5)]
    Campaign.objects.filter(pk__in=[made[1].pk, made[2].pk]).update(created_at=base)
    contacts = [ContactFactory(account=account) for _ in range(3)]
    enrollments.enroll(campaign_id=made[2].pk, contact_ids=[c.pk for c in contacts])
    CampaignFactory()  # another account's
    queryset = Campaign.objects.filter(account=account)
    extend = selectors.campaigns_with_relations
    annotations = ("stats_json", "step_rows", "credential_rows")

    def shown(objects):
        return [
            (o.pk, o.name, o.created_at, *(_sorted(getattr(o, a)) for a in annotations))
            for o in objects
        ]

    anchor, seen = None, []
    while True:
        expected = list(_keyset(extend(queryset), anchor)[:2])
        first = page_fetch(queryset, anchor, 2, extend)  # the ORM, keeping the statement
        with django_assert_num_queries(1):
            again = page_fetch(queryset, anchor, 2, extend)  # the kept statement
        assert shown(first) == shown(again) == shown(expected)
        seen += [o.pk for o in again]
        if len(again) < 2:
            break
        anchor = {"created_at": again[-1].created_at, "pk": again[-1].pk}
    assert sorted(seen) == sorted(c.pk for c in made)
    assert None not in pagination._statements.values()
    stats = {o.pk: o.stats_json for o in page_fetch(queryset, None, 10, extend)}
    assert stats[made[2].pk]["enrolled"] == 3


def _sorted(value):
    return sorted(value, key=str) if isinstance(value, list) else value


# --- every keyset page is served by an index in its full order ----------------------


@pytest.mark.parametrize("anchored", [False, True], ids=["first page", "next page"])
def test_each_keyset_list_is_read_in_index_order_without_a_sort(account, anchored):
    """Many rows may share one created_at (one statement writes a batch): the index must
    hold the tie-breaker too, or each page sorts every row of that instant."""
    from django.db import connection

    from outreach.models.campaigns import Campaign
    from outreach.models.contacts import ContactImport
    from outreach.models.mailboxes import SmtpCredential
    from webhooks.models import Webhook, WebhookDelivery

    lists = {
        "api keys": ApiKey.objects.filter(account=account),
        "mailboxes": SmtpCredential.objects.filter(account=account),
        "campaigns": Campaign.objects.filter(account=account),
        "contacts": Contact.objects.filter(account=account),
        "imports": ContactImport.objects.filter(account=account),
        "enrollments": Enrollment.objects.filter(campaign_id=account.pk),
        "enrollments by status": Enrollment.objects.filter(campaign_id=account.pk, status="sent"),
        "deliveries": WebhookDelivery.objects.filter(webhook=Webhook(pk=account.pk)),
    }
    anchor = {"created_at": timezone.now(), "pk": account.pk} if anchored else None
    with connection.cursor() as cursor:
        # Whatever the tables hold (a sort of a few rows is cheap), the planner takes an
        # index in the full order if there is one; without one it must still sort.
        for setting in ("seqscan", "bitmapscan", "sort", "incremental_sort"):
            cursor.execute(f"SET LOCAL enable_{setting} = off")
    for name, queryset in lists.items():
        plan = _keyset(queryset, anchor)[:21].explain()
        assert "Sort" not in plan and "Index" in plan, f"{name}:\n{plan}"
        if anchored:  # the scan starts at the anchor: no newer row is read and dropped
            conditions = [line for line in plan.splitlines() if "Index Cond" in line]
            assert any("created_at <=" in line for line in conditions), f"{name}:\n{plan}"
