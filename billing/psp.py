"""The payment provider (Stripe) behind one seam: every call the service makes
to Stripe goes through here, with a timeout, and every provider failure becomes
PspUnavailable (502 psp_unavailable)."""

import logging

import stripe
from django.conf import settings

from config.api.errors import PspUnavailable

logger = logging.getLogger(__name__)

STRIPE_TIMEOUT_SECONDS = 15
STRIPE_MAX_NETWORK_RETRIES = 2


def psp_configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def stripe_client() -> stripe.StripeClient:
    base_addresses = {"api": settings.STRIPE_API_BASE} if settings.STRIPE_API_BASE else {}
    return stripe.StripeClient(
        settings.STRIPE_SECRET_KEY,
        base_addresses=base_addresses,
        http_client=stripe.RequestsClient(timeout=STRIPE_TIMEOUT_SECONDS),
        max_network_retries=STRIPE_MAX_NETWORK_RETRIES,
    )


def customer_create(*, email: str, name: str, account_id: str) -> str:
    """Create the provider customer of an account; returns its id.

    The idempotency key is derived from the account id, so a retried signup step
    never makes two customers for one account.
    """
    try:
        customer = stripe_client().v1.customers.create(
            params={"email": email, "name": name or email, "metadata": {"account_id": account_id}},
            options={"idempotency_key": f"customer-create-{account_id}"},
        )
    except stripe.StripeError as exc:
        logger.warning("stripe customer create failed: %s", type(exc).__name__)
        raise PspUnavailable() from exc
    return customer.id
