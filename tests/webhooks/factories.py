import factory

from tests.accounts.factories import AccountFactory
from webhooks.models import Webhook, WebhookDelivery
from webhooks.secrets import secret_encrypt

TEST_SECRET = "whsec_test_secret_for_factories"


class WebhookFactory(factory.django.DjangoModelFactory):
    """A webhook for ["*"] whose secret is TEST_SECRET (pass `secret=` to change it)."""

    class Meta:
        model = Webhook
        exclude = ["secret"]

    account = factory.SubFactory(AccountFactory)
    url = "https://hooks.example.com/in"
    event_filters = factory.LazyFunction(lambda: ["*"])
    secret = TEST_SECRET
    secret_encrypted = factory.LazyAttribute(lambda o: secret_encrypt(o.secret))


class WebhookDeliveryFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WebhookDelivery

    webhook = factory.SubFactory(WebhookFactory)
    event_type = "enrollment.sent"
    attempt = 1
    status_code = 200
