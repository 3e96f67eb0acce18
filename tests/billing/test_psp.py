import pytest

from billing import psp
from billing.errors import PspUnavailable


@pytest.mark.django_db
def test_customer_create_makes_a_customer_at_the_provider(stripe_settings):
    customer_id = psp.customer_create(email="owner@example.com", name="Owner", account_id="acc-1")
    customer = stripe_settings.get(f"/v1/customers/{customer_id}")
    assert customer["email"] == "owner@example.com"
    assert customer["metadata"] == {"account_id": "acc-1"}


def test_customer_create_unreachable_provider_is_psp_unavailable(settings):
    settings.STRIPE_SECRET_KEY = "sk_test_x"
    settings.STRIPE_API_BASE = "http://127.0.0.1:1"
    with pytest.raises(PspUnavailable):
        psp.customer_create(email="owner@example.com", name="", account_id="acc-2")
