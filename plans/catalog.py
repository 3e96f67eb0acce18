"""The plan catalog (docs/billing.md, "GET /plans"), kept present.

The 0002 data migration creates it. `catalog_ensure` runs after every `migrate`
(and after a test database flush, which empties every table) and creates only
the catalog plans that are missing: it never overwrites what staff changed.
"""

from typing import Any

from django.apps import apps as global_apps
from django.apps.registry import Apps
from django.conf import settings

# slug, name, tier, monthly_limit, setting holding the Stripe price id
CATALOG = [
    ("free", "Free", 0, 100, None),
    ("hobby", "Hobby", 1, 5000, "STRIPE_PRICE_HOBBY"),
    ("pro", "Pro", 2, 25000, "STRIPE_PRICE_PRO"),
    ("scale", "Scale", 3, 150000, "STRIPE_PRICE_SCALE"),
]


def catalog_ensure(plan_model: Any) -> int:
    # plan_model: Plan, or the migration state's historical model of it.
    """Create the missing catalog plans; returns how many were created."""
    existing = set(plan_model.objects.values_list("slug", flat=True))
    created = 0
    for slug, name, tier, monthly_limit, price_setting in CATALOG:
        if slug in existing:
            continue
        price = getattr(settings, price_setting, "") if price_setting else ""
        plan_model.objects.create(
            slug=slug, name=name, tier=tier, monthly_limit=monthly_limit, psp_price_id=price or None
        )
        created += 1
    return created


def catalog_ensure_after_migrate(sender: object, apps: Apps | None = None, **kwargs: Any) -> None:
    # migrate passes the migration state's apps; a flush may not.
    apps = apps or global_apps
    try:
        plan_model = apps.get_model("plans", "Plan")
    except LookupError:  # migrating backwards past plans.0001
        return
    catalog_ensure(plan_model)
