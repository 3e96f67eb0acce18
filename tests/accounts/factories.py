import factory

from accounts.models import Account
from plans.models import Plan


class AccountFactory(factory.django.DjangoModelFactory):
    """An account on the free plan. Keys: accounts.services.api_key_create (it returns the plaintext)."""

    class Meta:
        model = Account

    email = factory.Sequence(lambda n: f"owner{n}@example.com")
    name = factory.Faker("company")
    plan = factory.LazyFunction(lambda: Plan.objects.get(slug="free"))
