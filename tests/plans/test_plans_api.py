import pytest
from django.utils import timezone

from plans.models import Plan
from tests.plans.factories import PlanFactory

pytestmark = pytest.mark.django_db


def test_it_lists_paid_public_plans_by_tier(anon_client):
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_hobby")
    Plan.objects.filter(slug="pro").update(psp_price_id="price_pro")
    Plan.objects.filter(slug="scale").update(psp_price_id="price_scale")
    PlanFactory(slug="enterprise-acme", tier=5, public=False)
    PlanFactory(slug="legacy", tier=1, archived_at=timezone.now())
    PlanFactory(slug="team", tier=2, monthly_limit=40000, psp_price_id="price_team")

    response = anon_client.get("/plans")

    assert response.status_code == 200
    body = response.json()
    assert [p["slug"] for p in body] == ["hobby", "pro", "team", "scale"]
    assert body[0] == {
        "slug": "hobby",
        "name": "Hobby",
        "tier": 1,
        "monthly_limit": 5000,
        "psp_price_id": "price_hobby",
    }
    assert [p["tier"] for p in body] == sorted(p["tier"] for p in body)


def test_it_omits_plans_without_a_price(anon_client):
    # Without STRIPE_PRICE_* the paid catalog plans have no price yet.
    Plan.objects.exclude(slug="free").update(psp_price_id=None)
    assert anon_client.get("/plans").json() == []


def test_catalog_constants():
    catalog = {p.slug: (p.tier, p.monthly_limit) for p in Plan.objects.all()}
    assert catalog == {
        "free": (0, 100),
        "hobby": (1, 5000),
        "pro": (2, 25000),
        "scale": (3, 150000),
    }


def test_it_needs_no_key_and_ignores_a_bad_one(anon_client):
    response = anon_client.get("/plans", HTTP_AUTHORIZATION="Bearer junk")
    assert response.status_code == 200


def test_catalog_comes_back_after_a_flush_without_overwriting_staff_changes():
    from django.core.management import call_command

    Plan.objects.filter(slug="pro").update(name="Pro (renamed by staff)")
    Plan.objects.filter(slug="hobby").delete()
    call_command("migrate", verbosity=0)  # post_migrate, as after a flush
    assert Plan.objects.get(slug="pro").name == "Pro (renamed by staff)"
    assert Plan.objects.get(slug="hobby").monthly_limit == 5000


def test_the_list_and_checkout_read_one_purchasable_rule():
    """Every mix of public, archived and priced: GET /plans lists exactly the plans
    checkout would sell, and checkout names the first condition a plan fails."""
    Plan.objects.all().delete()
    expected = {}
    mixes = [(p, a, c) for p in (True, False) for a in (True, False) for c in ("price", None)]
    # "" as stored by an update (save() keeps an empty price id NULL); unique, so once.
    for n, (public, archived, price) in enumerate([*mixes, (True, False, "")]):
        plan = PlanFactory(
            tier=n % 2, public=public, archived_at=timezone.now() if archived else None
        )
        Plan.objects.filter(pk=plan.pk).update(psp_price_id=f"price_{n}" if price else price)
        unpriced = "free" if n % 2 == 0 else "unpriced"
        reasons = [(not public, "private"), (archived, "archived"), (not price, unpriced)]
        expected[plan.slug] = next((why for failed, why in reasons if failed), None)

    plans = Plan.objects.all()
    assert {p.slug: p.unpurchasable_reason() for p in plans} == expected
    listed = set(Plan.objects.purchasable().values_list("slug", flat=True))
    assert listed == {slug for slug, why in expected.items() if why is None}
    assert len(listed) == 1
    # The plans refused for each reason, read in SQL (the banner's "unpriced" list).
    for reason in ("private", "archived", "free", "unpriced"):
        refused = set(Plan.objects.refused_as(reason).values_list("slug", flat=True))
        assert refused == {slug for slug, why in expected.items() if why == reason}, reason
