from django.db.models import QuerySet

from plans.models import FREE_PLAN_SLUG, Plan


def plan_list_purchasable() -> QuerySet[Plan]:
    return Plan.objects.purchasable().order_by("tier", "slug")


def plan_get_free() -> Plan:
    return Plan.objects.get(slug=FREE_PLAN_SLUG)
