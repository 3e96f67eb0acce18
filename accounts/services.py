import logging
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from accounts.errors import ApiKeyLimitReached, CannotRevokeLastKey
from accounts.models import Account, ApiKey, IdempotencyRecord, active_keys_q
from accounts.tokens import PREFIX_LENGTH, token_generate, token_hash
from config.api.errors import ValidationFailed
from plans.models import Plan

logger = logging.getLogger(__name__)

SIGNUP_KEY_LABEL = "Signup default"
DUPLICATE_EMAIL_MESSAGE = "An account with this email already exists."
IDEMPOTENCY_WINDOW = timedelta(hours=24)

# What other apps add to a signup, registered by their AppConfig.ready (billing: the
# payment provider's customer, billing.customers). A step runs before the signup's
# transaction, with no transaction open (it may wait on a peer), with the new account
# not saved yet: its id is chosen, and the fields the step sets on it are saved with it.
# It returns an undo callable, run if the signup fails after it, or None.
SignupStep = Callable[[Account], Callable[[], None] | None]
_signup_steps: list[SignupStep] = []


def signup_step_register(step: SignupStep) -> None:
    """Run `step` in every signup from now on (once, however often it is registered)."""
    if step not in _signup_steps:
        _signup_steps.append(step)


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str  # Shown once, in the creation response; never stored.


def api_key_create(
    *,
    account: Account,
    label: str = "",
    client_kind: str = ApiKey.ClientKind.DIRECT,
    role: str = ApiKey.Role.ADMIN,
    daily_send_limit: int | None = None,
    expires_at: datetime | None = None,
) -> IssuedKey:
    """A new key of the account. Raises ApiKeyLimitReached when the account already holds
    API_KEYS_MAX active keys (expired ones are not active): the account row is locked
    first, so concurrent creations count one after the other and none slips past the
    bound."""
    plaintext = token_generate()
    with transaction.atomic():
        Account.objects.select_for_update(no_key=True).filter(pk=account.pk).first()
        active = ApiKey.objects.filter(active_keys_q(), account=account).count()
        if active >= settings.API_KEYS_MAX:
            raise ApiKeyLimitReached(details={"limit": settings.API_KEYS_MAX})
        api_key = ApiKey.objects.create(
            account=account,
            prefix=plaintext[:PREFIX_LENGTH],
            key_hash=token_hash(plaintext),
            label=label,
            client_kind=client_kind,
            role=role,
            daily_send_limit=daily_send_limit,
            expires_at=expires_at,
        )
    logger.info(
        "api key created account=%s key=%s prefix=%s", account.pk, api_key.pk, api_key.prefix
    )
    return IssuedKey(api_key=api_key, plaintext=plaintext)


def api_key_revoke(*, api_key: ApiKey) -> ApiKey:
    """Revoke a key unless it is the account's last active one, or its last active admin
    key (expired keys are not active).

    The account row is locked first, so two requests revoking an account's last
    two keys at once run one after the other and the second sees it would leave
    none. Revoking a revoked key changes nothing.
    """
    with transaction.atomic():
        # FOR NO KEY UPDATE: serialises revocations of one account without
        # blocking the FOR KEY SHARE locks that inserts referencing it take.
        Account.objects.select_for_update(no_key=True).filter(pk=api_key.account_id).first()
        current = ApiKey.objects.get(pk=api_key.pk)
        if current.revoked_at is not None:
            return current
        others = ApiKey.objects.filter(active_keys_q(), account_id=current.account_id).exclude(
            pk=current.pk
        )
        if not others.exists():
            raise CannotRevokeLastKey(details={"reason": "last_key"})
        if current.role == ApiKey.Role.ADMIN and not others.filter(role=ApiKey.Role.ADMIN).exists():
            raise CannotRevokeLastKey(
                "The account's last active admin key cannot be revoked.",
                details={"reason": "last_admin_key"},
            )
        current.revoked_at = timezone.now()
        current.save(update_fields=["revoked_at"])
    logger.info(
        "api key revoked account=%s key=%s prefix=%s",
        current.account_id,
        current.pk,
        current.prefix,
    )
    return current


@dataclass(frozen=True)
class Signup:
    account: Account
    issued_key: IssuedKey


def account_signup(
    *, email: str, name: str = "", written: Callable[[Signup], object] | None = None
) -> Signup:
    """Create an account on the free plan with its first key.

    The registered signup steps run first, with no transaction open (billing's creates
    the payment provider's customer when the provider is configured, and sets its id on
    the account): if a step fails (PspUnavailable), nothing is written. The account, its
    key and the step's fields are then inserted in one short transaction, with
    `written(signup)` (the API's audit row). If that fails, the steps' undos run before
    the error goes on (billing's deletes the customer at the provider, best effort: if
    that fails too, a warning names it; its metadata names the account id that never
    committed). An account is never committed without what its steps set.
    """
    email = email.strip()
    if Account.objects.filter(email__iexact=email).exists():
        raise ValidationFailed({"email": [DUPLICATE_EMAIL_MESSAGE]})
    account = Account(email=email, name=name, plan=Plan.objects.get(slug="free"))
    undo: list[Callable[[], None]] = []
    try:
        for step in _signup_steps:
            step_undo = step(account)
            if step_undo is not None:
                undo.append(step_undo)
        with transaction.atomic():
            account.save(force_insert=True)
            issued = api_key_create(
                account=account, label=SIGNUP_KEY_LABEL, client_kind=ApiKey.ClientKind.DIRECT
            )
            signup = Signup(account=account, issued_key=issued)
            if written is not None:
                written(signup)
    except Exception as exc:
        for step_undo in reversed(undo):
            step_undo()
        # Two signups with one email at once: the unique index decided.
        if isinstance(exc, IntegrityError) and Account.objects.filter(email__iexact=email).exists():
            raise ValidationFailed({"email": [DUPLICATE_EMAIL_MESSAGE]}) from None
        raise
    logger.info("signup account=%s key prefix=%s", account.pk, issued.api_key.prefix)
    return signup


def idempotency_records_prune(*, now: datetime | None = None, batch_size: int = 5000) -> int:
    """Delete idempotency records older than the 24-hour window, in batches so
    no single statement holds locks for long. Returns how many were deleted."""
    cutoff = (now or timezone.now()) - IDEMPOTENCY_WINDOW
    deleted = 0
    while True:
        ids = list(
            IdempotencyRecord.objects.filter(created_at__lt=cutoff).values_list("pk", flat=True)[
                :batch_size
            ]
        )
        if not ids:
            return deleted
        deleted += IdempotencyRecord.objects.filter(pk__in=ids).delete()[0]
