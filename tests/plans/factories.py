import factory

from plans.models import Plan


class PlanFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Plan

    slug = factory.Sequence(lambda n: f"plan-{n}")
    name = factory.LazyAttribute(lambda o: o.slug.title())
    tier = 1
    monthly_limit = 1000
    psp_price_id = factory.Sequence(lambda n: f"price_test_{n}")
    public = True
