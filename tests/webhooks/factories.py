import factory

from tests.accounts.factories import AccountFactory
from webhooks.models import Webhook, WebhookDelivery

TEST_SECRET = "whsec_test_secret_for_factories"


class WebhookFactory(factory.django.DjangoModelFactory):
    """A webhook for ["*"] whose secret is TEST_SECRET (pass `secret=` to change it)."""

    class Meta:
        model = Webhook

    account = factory.SubFactory(AccountFactory)
    url = "https://hooks.example.com/in"
    event_filters = factory.LazyFunction(lambda: ["*"])
    secret = TEST_SECRET


class WebhookDeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WebhookDelivery

    webhook = factory.SubFactory(WebhookFactory)
    event_type = "enrollment.sent"
    attempt = 1
    status_code = 200
