"""Hosted Checkout and the Billing Portal: starting a session for an account."""

import hashlib
import logging
import uuid
from datetime import timedelta
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from billing import psp
from billing.errors import (
    AlreadySubscribed,
    CheckoutInProgress,
    NoPspCustomer,
    PlanNotFound,
    PlanNotPurchasable,
)
from billing.models import CheckoutSession
from billing.subscriptions import stripe_timestamp
from config.timestamps import utc_timestamp
from plans.models import Plan

logger = logging.getLogger(__name__)

# How long a hosted checkout stays payable (Stripe's minimum is 30 minutes). While it
# is open the account cannot start another one.
CHECKOUT_SESSION_MINUTES = 30
# A checkout claim still "creating" after this long belongs to a request that died.
CHECKOUT_CLAIM_STALE_SECONDS = 120


def _return_url(status: str) -> str:
    """BILLING_RETURN_URL with `status=<status>` added to whatever query it has."""
    parts = urlsplit(settings.BILLING_RETURN_URL)
    query = [(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if k != "status"]
    query.append(("status", status))
    return urlunsplit(parts._replace(query=urlencode(query)))


def _stripe_idempotency_key(
    operation: str, *, account, client_key: str | None, fingerprint: str
) -> str:
    """The idempotency key sent to Stripe.

    Derived from the client's Idempotency-Key when there is one, so a retry
    whose first attempt reached Stripe but never got its answer back gets the
    same session; a fresh one otherwise (Stripe recommends a new Checkout
    Session per attempt).
    """
    if not client_key:
        return f"{operation}-{uuid.uuid4()}"
    digest = hashlib.sha256(f"{account.pk}\n{client_key}\n{fingerprint}".encode()).hexdigest()
    return f"{operation}-{digest[:48]}"


PLAN_NOT_PURCHASABLE_MESSAGES = {
    "private": "The plan {slug!r} is private and cannot be purchased.",
    "archived": "The plan {slug!r} is archived and cannot be purchased.",
    "free": "The plan {slug!r} is free and cannot be purchased.",
    "unpriced": (
        "The plan {slug!r} has no Stripe price yet, so it cannot be purchased: the "
        "operator sets its price id (the plan's psp_price_id in the admin)."
    ),
}


def checkout_session_start(*, account, plan_slug: str, client_key: str | None = None) -> str:
    """Start a hosted Checkout for a public, paid, non-archived plan; returns its URL."""
    plan = Plan.objects.filter(slug=plan_slug).first()
    if plan is None:
        raise PlanNotFound(f"No plan has the slug {plan_slug!r}.")
    reason = plan.unpurchasable_reason()
    if reason:
        raise PlanNotPurchasable(
            PLAN_NOT_PURCHASABLE_MESSAGES[reason].format(slug=plan.slug),
            details={"reason": reason},
        )
    if not account.psp_customer_id:
        raise NoPspCustomer()
    if account.psp_subscription_id:
        # Set while the subscription lives (active, trialing, past_due, or a later status
        # of it short of ending); cleared when it ends. Plan changes go through the portal.
        raise AlreadySubscribed(
            f"The account already has a subscription ({account.psp_subscription_status}); "
            "change or cancel it in the billing portal."
        )
    _checkout_sessions_settle(account=account)
    # The claim: at most one session per account is being created or open (a partial
    # unique constraint), so two concurrent checkouts cannot both reach Stripe.
    try:
        with transaction.atomic():
            claim = CheckoutSession.objects.create(
                account=account, plan_slug=plan.slug, status=CheckoutSession.Status.CREATING
            )
    except IntegrityError:
        raise CheckoutInProgress(
            "Another checkout of this account is being created; use its page or retry shortly."
        ) from None
    expires_at = timezone.now() + timedelta(minutes=CHECKOUT_SESSION_MINUTES)
    price_id = plan.psp_price_id
    assert price_id is not None  # unpurchasable_reason refused a plan without one
    try:
        session = psp.checkout_session_create(
            customer_id=account.psp_customer_id,
            price_id=price_id,
            account_id=str(account.pk),
            success_url=_return_url("success"),
            cancel_url=_return_url("cancel"),
            idempotency_key=_stripe_idempotency_key(
                "checkout", account=account, client_key=client_key, fingerprint=price_id
            ),
            expires_at=int(expires_at.timestamp()),
        )
    except BaseException:
        claim.delete()
        raise
    claim.psp_session_id = session["id"]
    claim.url = session["url"]
    claim.expires_at = stripe_timestamp(session["expires_at"]) or expires_at
    claim.status = CheckoutSession.Status.OPEN
    claim.save(update_fields=["psp_session_id", "url", "expires_at", "status"])
    return session["url"]


def _checkout_sessions_settle(*, account) -> None:
    """Bring the account's unfinished checkouts up to date, refusing a new one while
    one is still open (its page can still start a subscription) or has just completed
    (its subscription's notification is on its way)."""
    now = timezone.now()
    stale = now - timedelta(seconds=CHECKOUT_CLAIM_STALE_SECONDS)
    unfinished = CheckoutSession.objects.filter(
        account=account,
        status__in=[CheckoutSession.Status.CREATING, CheckoutSession.Status.OPEN],
    )
    for session in unfinished:
        if session.status == CheckoutSession.Status.CREATING:
            if session.created_at < stale:  # its request died between the claim and Stripe
                session.status = CheckoutSession.Status.FAILED
                session.save(update_fields=["status"])
                continue
            raise CheckoutInProgress(
                "Another checkout of this account is being created; retry shortly."
            )
        status = "expired" if session.expires_at and session.expires_at <= now else None
        if status is None:
            status = psp.checkout_session_status(session.psp_session_id) or "expired"
        if status == "open":
            raise CheckoutInProgress(
                "A checkout of this account is still open: complete it at its url, or wait "
                "until it expires.",
                details={
                    "url": session.url,
                    "plan_slug": session.plan_slug,
                    "expires_at": utc_timestamp(session.expires_at) if session.expires_at else None,
                },
            )
        session.status = (
            CheckoutSession.Status.COMPLETE
            if status == "complete"
            else CheckoutSession.Status.EXPIRED
        )
        session.save(update_fields=["status"])
        if status == "complete" and psp.subscriptions_live(account.psp_customer_id):
            raise AlreadySubscribed(
                "A checkout of this account has just completed; its subscription is being "
                "set up. Change or cancel it in the billing portal."
            )


def portal_session_start(*, account, client_key: str | None = None) -> str:
    """Open a Billing Portal session for the account's customer; returns its URL."""
    if not account.psp_customer_id:
        raise NoPspCustomer()
    return psp.portal_session_create(
        customer_id=account.psp_customer_id,
        return_url=settings.BILLING_RETURN_URL,
        idempotency_key=_stripe_idempotency_key(
            "portal", account=account, client_key=client_key, fingerprint=""
        ),
    )
