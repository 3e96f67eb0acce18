"""The payment provider (Stripe) behind one seam: every call the service makes
to Stripe goes through here, with a timeout, and every provider failure becomes
PspUnavailable (502 psp_unavailable)."""

import logging

import stripe
from django.conf import settings
from stripe.params.checkout import SessionCreateParams

from billing.errors import PspUnavailable

logger = logging.getLogger(__name__)

STRIPE_TIMEOUT_SECONDS = 15
STRIPE_MAX_NETWORK_RETRIES = 2


def _unavailable(what: str, exc: stripe.StripeError) -> PspUnavailable:
    """The error a failed call raises, the failure logged (the error's type only: its
    message may quote the request)."""
    logger.warning("stripe %s failed: %s", what, type(exc).__name__)
    return PspUnavailable()


def _not_found(exc: stripe.StripeError) -> bool:
    """Stripe does not know the object (or customer) named."""
    return isinstance(exc, stripe.InvalidRequestError) and exc.http_status == 404


def psp_configured() -> bool:
    return bool(settings.STRIPE_SECRET_KEY)


def stripe_client() -> stripe.StripeClient:
    return stripe.StripeClient(
        settings.STRIPE_SECRET_KEY,
        base_addresses={"api": settings.STRIPE_API_BASE} if settings.STRIPE_API_BASE else {},
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
        raise _unavailable("customer create", exc) from exc
    return customer.id


def customer_discard(customer_id: str) -> bool:
    """Delete a customer the service created but could not keep (its account never
    committed). Best effort: a failure is logged, never raised, because the caller
    is already failing; the customer's metadata names the account id that never
    existed, for manual cleanup."""
    try:
        stripe_client().v1.customers.delete(customer_id)
    except stripe.StripeError as exc:
        logger.warning(
            "stripe customer %s of an uncommitted signup not deleted: %s",
            customer_id,
            type(exc).__name__,
        )
        return False
    return True


def checkout_session_create(
    *,
    customer_id: str,
    price_id: str,
    account_id: str,
    success_url: str,
    cancel_url: str,
    idempotency_key: str,
    expires_at: int | None = None,
) -> dict:
    """A hosted Checkout Session in subscription mode for one price; returns its
    `id`, `url` and `expires_at` (a Unix time, or None)."""
    params: SessionCreateParams = {
        "mode": "subscription",
        "customer": customer_id,
        "line_items": [{"price": price_id, "quantity": 1}],
        "success_url": success_url,
        "cancel_url": cancel_url,
        "client_reference_id": account_id,
    }
    if expires_at is not None:
        params["expires_at"] = expires_at
    try:
        session = stripe_client().v1.checkout.sessions.create(
            params=params, options={"idempotency_key": idempotency_key}
        )
    except stripe.StripeError as exc:
        raise _unavailable("checkout session create", exc) from exc
    data = session.to_dict()
    return {
        "id": data.get("id") or "",
        "url": _session_url(session),
        "expires_at": data.get("expires_at"),
    }


def _retrieve(what: str, retrieve) -> dict | None:
    """`retrieve()` as plain data; None if Stripe does not know the object (404), and
    PspUnavailable for any other failure."""
    try:
        found = retrieve()
    except stripe.StripeError as exc:
        if _not_found(exc):
            return None
        raise _unavailable(f"{what} retrieve", exc) from exc
    return found.to_dict()


def checkout_session_status(session_id: str) -> str | None:
    """`open`, `complete` or `expired` as Stripe has the session now; None if Stripe
    does not know it."""
    session = _retrieve(
        "checkout session", lambda: stripe_client().v1.checkout.sessions.retrieve(session_id)
    )
    return None if session is None else session.get("status")


def portal_session_create(*, customer_id: str, return_url: str, idempotency_key: str) -> str:
    """A Billing Portal session for the customer; returns its URL."""
    try:
        session = stripe_client().v1.billing_portal.sessions.create(
            params={"customer": customer_id, "return_url": return_url},
            options={"idempotency_key": idempotency_key},
        )
    except stripe.StripeError as exc:
        raise _unavailable("portal session create", exc) from exc
    return _session_url(session)


def _session_url(session) -> str:
    url = session.to_dict().get("url")
    if not isinstance(url, str) or not url:
        # A session without a hosted page is no use to the caller.
        logger.warning(
            "stripe session %s came back without a hosted url", session.to_dict().get("id")
        )
        raise PspUnavailable()
    return url


def subscription_retrieve(subscription_id: str) -> dict | None:
    """The subscription as Stripe has it now, as plain data; None if Stripe does not know it."""
    return _retrieve(
        "subscription", lambda: stripe_client().v1.subscriptions.retrieve(subscription_id)
    )


# Subscription statuses during which a subscription is live (it bills the customer).
LIVE_SUBSCRIPTION_STATUSES = frozenset({"active", "trialing", "past_due"})
SUBSCRIPTIONS_LISTED_MAX = 10_000


def _subscriptions_list(params: dict) -> list[dict]:
    """Every subscription Stripe lists for `params`; none when it does not know the
    customer named."""
    try:
        page = stripe_client().v1.subscriptions.list(params={**params, "limit": 100})
        found = []
        for subscription in page.auto_paging_iter():
            found.append(subscription.to_dict())
            if len(found) >= SUBSCRIPTIONS_LISTED_MAX:
                logger.warning("stripe subscriptions list cut at %d", SUBSCRIPTIONS_LISTED_MAX)
                break
    except stripe.StripeError as exc:
        if _not_found(exc) and "customer" in params:
            return []
        raise _unavailable("subscriptions list", exc) from exc
    return found


def subscriptions_live(customer_id: str) -> list[dict]:
    """The customer's live subscriptions (active, trialing, past_due), as plain data."""
    listed = _subscriptions_list({"customer": customer_id})  # Stripe's default: not canceled
    return [s for s in listed if s.get("status") in LIVE_SUBSCRIPTION_STATUSES]


def customers_with_live_subscriptions() -> set[str]:
    """Every customer that has a live subscription at Stripe (reconcile's search)."""
    customers: set[str] = set()
    for status in sorted(LIVE_SUBSCRIPTION_STATUSES):
        for subscription in _subscriptions_list({"status": status}):
            customer = subscription.get("customer")
            if isinstance(customer, dict):
                customer = customer.get("id")
            if isinstance(customer, str) and customer:
                customers.add(customer)
    return customers


def subscription_cancel(subscription_id: str) -> bool:
    """Cancel a subscription at once (no proration, no refund of the current period:
    a duplicate's first invoice is the customer's to settle with support). True when
    it is cancelled now or was already; PspUnavailable when Stripe failed."""
    try:
        stripe_client().v1.subscriptions.cancel(
            subscription_id, options={"idempotency_key": f"duplicate-cancel-{subscription_id}"}
        )
    except stripe.StripeError as exc:
        if _not_found(exc):
            return True
        raise _unavailable("subscription cancel", exc) from exc
    return True
