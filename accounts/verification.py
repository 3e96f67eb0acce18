"""The signup address proof (docs/accounts.md, "Proving the signup address").

Signup emails the account a link, `{BASE_URL}/signup/verify/<token>`. The token is signed
(Django's signing, keyed with SECRET_KEY and its own salt), names the account and the
address it was sent to, and carries its time: it cannot be forged, works for
LINK_MAX_AGE, and stops working if the account's address changes. Opening the link shows
a page with a button; only the button's POST proves the address, so a mail scanner that
fetches every link proves nothing.

With SIGNUP_EMAIL_VERIFICATION on, an account whose address is not proven may not start
sending (email_verified_check: 403 email_unverified).
"""

import logging
import uuid
from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.core import signing
from django.core.mail import send_mail
from django.template.loader import render_to_string
from django.utils import timezone

from accounts.errors import EmailUnverified
from accounts.models import Account

logger = logging.getLogger(__name__)

SALT = "accounts.email_verification"
LINK_MAX_AGE = timedelta(days=3)
RESEND_PATH = "/signup/verification"


def token_make(*, account: Account) -> str:
    return signing.dumps({"a": account.pk.hex, "e": account.email.lower()}, salt=SALT)


class LinkInvalid(Exception):
    """The link is tampered with, malformed, expired, or names an account or address that
    is no longer there. The message says which, for the page."""


def token_account(token: str) -> Account:
    """The account a verification token names (the address it was sent to unchanged)."""
    try:
        value = signing.loads(token, salt=SALT, max_age=LINK_MAX_AGE)
    except signing.SignatureExpired:
        raise LinkInvalid("This link has expired.") from None
    except signing.BadSignature:
        raise LinkInvalid("This link is not valid.") from None
    try:
        account_id, email = uuid.UUID(hex=value["a"]), str(value["e"])
    except (TypeError, KeyError, ValueError, AttributeError):
        raise LinkInvalid("This link is not valid.") from None
    account = Account.objects.filter(pk=account_id).first()
    if account is None or account.email.lower() != email:
        raise LinkInvalid("This link is for an address the account no longer has.")
    return account


def link_url(*, account: Account) -> str:
    return f"{settings.BASE_URL}/signup/verify/{token_make(account=account)}"


def resend_url() -> str:
    return f"{settings.BASE_URL}{RESEND_PATH}"


def email_verification_send(*, account: Account) -> bool:
    """Email the account its link, through the service's own mail (EMAIL_URL). False,
    and nothing sent, when the address is proven already. Raises what the mail server
    raised (the task retries)."""
    if account.email_verified:
        return False
    context = {
        "email": account.email,
        "link": link_url(account=account),
        "days": LINK_MAX_AGE.days,
        "resend_url": resend_url(),
        "base_url": settings.BASE_URL,
    }
    send_mail(
        subject="Confirm your email address",
        message=render_to_string("accounts/email_verification.txt", context),
        from_email=None,  # DEFAULT_FROM_EMAIL
        recipient_list=[account.email],
    )
    logger.info("verification email sent account=%s", account.pk)
    return True


@dataclass(frozen=True)
class Verified:
    account: Account
    now_verified: bool  # False: it was proven before


def account_email_verify(*, account: Account) -> Verified:
    """Mark the account's address proven. One conditional UPDATE: two clicks at once
    record the first one's time."""
    now = timezone.now()
    updated = Account.objects.filter(pk=account.pk, email_verified_at__isnull=True).update(
        email_verified_at=now
    )
    account.refresh_from_db(fields=["email_verified_at"])
    if updated:
        logger.info("signup address verified account=%s", account.pk)
    return Verified(account=account, now_verified=bool(updated))


def verification_required(account: Account) -> bool:
    """Whether the account must prove its address before it sends."""
    return settings.SIGNUP_EMAIL_VERIFICATION and not account.email_verified


def email_verified_check(account: Account) -> None:
    """403 email_unverified while the account must still prove its address. For the
    endpoints that start sending (dispatch, outreach), called after authentication and the
    rate limits (the refusal counts like any request) and before the handler (an
    Idempotency-Key does not store it: the same key works once the address is proven)."""
    if verification_required(account):
        raise EmailUnverified(
            f"Confirm your signup address first: open the link emailed to {account.email}. "
            "No email, or the link expired? POST /signup/verification sends a new one.",
            details={"email": account.email, "resend_url": resend_url()},
        )
