"""The plan catalog of SPEC.md section 8. Paid plans take their Stripe price ids
from STRIPE_PRICE_HOBBY / _PRO / _SCALE when set (staff can set them in the admin
later)."""

from django.conf import settings
from django.db import migrations

CATALOG = [
    ("free", "Free", 0, 100, None),
    ("hobby", "Hobby", 1, 5000, "STRIPE_PRICE_HOBBY"),
    ("pro", "Pro", 2, 25000, "STRIPE_PRICE_PRO"),
    ("scale", "Scale", 3, 150000, "STRIPE_PRICE_SCALE"),
]


def create_catalog(apps, schema_editor):
    Plan = apps.get_model("plans", "Plan")
    for slug, name, tier, monthly_limit, price_setting in CATALOG:
        price = getattr(settings, price_setting, "") if price_setting else ""
        Plan.objects.update_or_create(
            slug=slug,
            defaults={
                "name": name,
                "tier": tier,
                "monthly_limit": monthly_limit,
                "psp_price_id": price or None,
                "public": True,
            },
        )


def remove_catalog(apps, schema_editor):
    apps.get_model("plans", "Plan").objects.filter(slug__in=[row[0] for row in CATALOG]).delete()


class Migration(migrations.Migration):
    dependencies = [("plans", "0001_initial")]
    operations = [migrations.RunPython(create_catalog, remove_catalog)]
