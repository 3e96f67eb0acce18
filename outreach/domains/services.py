"""Writes of the domain checks: a mailbox's From domain check (stored), and the
account's tracking domain (set, verified)."""

import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account
from config.api.errors import ValidationFailed
from outreach.domains import tracking
from outreach.domains.sender import ERROR, sender_domain_inspect
from outreach.models.domains import SenderDomainCheck
from outreach.models.mailboxes import SmtpCredential

# A mailbox's From domain is checked again once its last check is this old (beat).
SENDER_CHECK_MAX_AGE = timedelta(hours=24)
# Mailboxes checked per beat run at most; the rest wait for the next run (an hour).
SENDER_CHECKS_PER_RUN = 500


def _from_domain(credential: SmtpCredential) -> str:
    return credential.from_email.rpartition("@")[2].lower()


def sender_domain_check_run(
    *,
    credential: SmtpCredential,
    dkim_selectors: list[str] | None = None,
    now: datetime | None = None,
) -> SenderDomainCheck:
    """Check the mailbox's From domain now and store the result (its findings replace the
    last ones). `dkim_selectors`, when given, replace the account's named selectors."""
    now = now or timezone.now()
    previous = SenderDomainCheck.objects.filter(credential=credential).first()
    selectors = (
        dkim_selectors
        if dkim_selectors is not None
        else (previous.dkim_selectors if previous is not None else [])
    )
    domain = _from_domain(credential)
    inspection = sender_domain_inspect(domain, selectors)
    levels = {f.level for f in inspection.findings}
    if ERROR in levels:
        status = SenderDomainCheck.Status.ERROR
    elif levels:
        status = SenderDomainCheck.Status.WARNING
    else:
        status = SenderDomainCheck.Status.PASS
    check, _ = SenderDomainCheck.objects.update_or_create(
        credential=credential,
        defaults={
            "domain": domain,
            "dkim_selectors": selectors,
            "status": status,
            "findings": inspection.findings_json(),
            "records": inspection.records,
            "checked_at": now,
        },
    )
    return check


def domain_check_summary(check: SenderDomainCheck | None) -> dict | None:
    """What sending_status shows of a mailbox's check."""
    if check is None:
        return None
    return {
        "domain": check.domain,
        "status": check.status,
        "checked_at": check.checked_at,
        "findings": check.findings,
    }


def sender_domains_check_due(*, now: datetime | None = None, budget_seconds: float = 3000.0) -> int:
    """Beat: check the enabled mailboxes never checked, checked more than a day ago, or
    whose From domain changed since; at most SENDER_CHECKS_PER_RUN, and stop after
    `budget_seconds` (the rest wait for the next run). Returns the number checked."""
    now = now or timezone.now()
    started = time.monotonic()
    stale = now - SENDER_CHECK_MAX_AGE
    candidates = (
        SmtpCredential.objects.filter(disabled_at__isnull=True)
        .exclude(auth_method=SmtpCredential.AuthMethod.SIMULATOR)  # it never sends real mail
        .select_related("domain_check")
        .order_by("domain_check__checked_at", "pk")
    )
    checked = 0
    for credential in candidates.iterator(chunk_size=SENDER_CHECKS_PER_RUN):
        if checked >= SENDER_CHECKS_PER_RUN or time.monotonic() - started > budget_seconds:
            break
        check = getattr(credential, "domain_check", None)
        if (
            check is not None
            and check.checked_at > stale
            and check.domain == _from_domain(credential)
        ):
            continue
        sender_domain_check_run(credential=credential, now=now)
        checked += 1
    return checked


# --- tracking domain -----------------------------------------------------------------------


def _nothing(account: Account) -> None:
    return None


def _taken(domain: str, account_id) -> ValidationFailed:
    name, value = tracking.verification_record(account_id, domain)
    return ValidationFailed(
        {
            "domain": [
                "This domain is another account's verified tracking domain. It stays that "
                f"account's while {name} holds that account's TXT value (or DNS does not "
                "answer), unless it removes the domain. Otherwise it goes to the account "
                f"that proves it: publish a TXT record {name} with the value {value} (and "
                f"the CNAME to {settings.TRACKING_DOMAIN_CNAME_TARGET}), then set it again."
            ]
        }
    )


class _Unasked(Exception):
    """A decision under the locks needs a DNS answer not asked yet."""


class _Answers:
    """The DNS answers of one tracking domain set, each asked once and only while no
    transaction is open: under the locks, a question not asked yet raises _Unasked."""

    def __init__(self) -> None:
        self.known: dict[tuple, Any] = {}
        self.locked = False

    def __call__(self, lookup: Callable[..., Any], *args: Any) -> Any:
        key = (lookup.__name__, *args)
        if key not in self.known:
            if self.locked:
                raise _Unasked(key)
            self.known[key] = lookup(*args)
        return self.known[key]


# Rounds of lookups and locked checks before a set gives up: each round but the last
# found the domain's claim changed under it (another account's PUT, beat's check).
TRACKING_SET_ROUNDS = 3


def tracking_domain_set(
    *, account: Account, domain: str | None, written: Callable[[Account], object] = _nothing
) -> Account:
    """Set (and verify at once) or clear the account's tracking domain.

    A domain is taken with both its records (outreach.domains.tracking): the CNAME, and
    the TXT record naming this account:
    - held by no other account: it is the account's claim, `verified` once both records
      are there, else `failed` (or `pending` when DNS did not answer). The account's own
      domain, already `verified`, is checked again as beat does, by its CNAME alone;
    - claimed by another account that has not proven it (`pending`, `failed`): taken over
      when its DNS names this account (that claim is cleared), else 422 saying which TXT
      record to publish;
    - another account's `verified` domain: taken over (that claim is cleared) when its DNS
      names this account and not that one (a domain verified by its CNAME alone, before
      the TXT record was asked for, or whose record that account removed); else 422,
      until that account removes it, or beat finds its CNAME gone.

    The DNS lookups are made first, with no transaction open, for the claim as it is
    read then. The change is then made in a short transaction that locks the account's
    row and the row of the domain's holder, and decides again on the claim as the locks
    hold it: if it needs an answer not asked yet (the claim changed meanwhile), the
    transaction ends, the lookup is made, and the round starts again. `written(account)`
    runs in the change's transaction (the API's audit row).
    """
    domain = (domain or "").strip().lower().rstrip(".")
    if not domain:
        with transaction.atomic():
            _tracking_domain_clear(account)
            written(account)
        return account
    ask = _Answers()
    for _ in range(TRACKING_SET_ROUNDS):
        ask.locked = False
        # Unlocked: the lookups the claim as read now needs (a 422 needs no write).
        _tracking_domain_decide(account, domain, _claim_holder(domain), ask)
        ask.locked = True
        try:
            with transaction.atomic():
                holder, status = _tracking_domain_decide(
                    account, domain, _claim_holder(domain, lock_also=account), ask
                )
                now = timezone.now()
                if holder is not None:
                    _tracking_domain_clear(holder)
                Account.objects.filter(pk=account.pk).update(
                    tracking_domain=domain,
                    tracking_domain_status=status,
                    tracking_domain_checked_at=now,
                )
                account.tracking_domain = domain
                account.tracking_domain_status = status
                account.tracking_domain_checked_at = now
                written(account)
            return account
        except _Unasked:
            continue  # the claim changed since its lookups: ask what it needs now
        except IntegrityError:  # an account that held nothing under the locks took it
            raise _taken(domain, account.pk) from None
    raise _taken(domain, account.pk)


def _claim_holder(domain: str, *, lock_also: Account | None = None) -> Account | None:
    """The account whose claim `domain` is, or None. With `lock_also`, its row and that
    account's are locked (FOR NO KEY UPDATE, in id order: two sets never wait on each
    other in turn); beat's re-check of either waits for the change, then finds it."""
    claims = Account.objects.filter(tracking_domain=domain)
    if lock_also is not None:
        claims = (
            Account.objects.select_for_update(no_key=True)
            .filter(Q(pk=lock_also.pk) | Q(tracking_domain=domain))
            .order_by("pk")
        )
    fields = ("id", "tracking_domain", "tracking_domain_status")
    return next((row for row in claims.only(*fields) if row.tracking_domain == domain), None)


def _tracking_domain_decide(
    account: Account, domain: str, current: Account | None, ask: _Answers
) -> tuple[Account | None, str]:
    """(the other account whose claim is cleared, or None; the account's new status), or
    the 422 of the contest."""
    holder = current if current is not None and current.pk != account.pk else None
    status = _tracking_domain_status(account, domain, current, ask)
    _tracking_domain_contest(account, domain, holder, status, ask)
    return holder, status


def _tracking_domain_clear(account: Account) -> Account:
    Account.objects.filter(pk=account.pk).update(
        tracking_domain="", tracking_domain_status="", tracking_domain_checked_at=None
    )
    account.tracking_domain = ""
    account.tracking_domain_status = ""
    account.tracking_domain_checked_at = None
    return account


def _tracking_domain_status(
    account: Account, domain: str, current: Account | None, ask: _Answers
) -> str:
    """The status `domain` gets as the account's (tracking_domain_set's docstring)."""
    verified = Account.TrackingDomainStatus.VERIFIED
    if (
        current is not None
        and current.pk == account.pk
        and current.tracking_domain_status == verified
    ):
        # Already this account's: what keeps it is the CNAME; a failed lookup keeps it.
        return ask(tracking.tracking_domain_reached, domain) or verified
    return (
        ask(tracking.tracking_domain_verify, domain, account.pk)
        or Account.TrackingDomainStatus.PENDING
    )


def _tracking_domain_contest(
    account: Account, domain: str, holder: Account | None, status: str, ask: _Answers
) -> None:
    """422 when another account's claim stands against this one's `status`."""
    verified = Account.TrackingDomainStatus.VERIFIED
    if holder is not None and holder.tracking_domain_status == verified:
        # Its proof, once published, stands; so does a lookup that could not tell.
        if (
            status != verified
            or ask(tracking.tracking_domain_proven, domain, holder.pk) is not False
        ):
            raise _taken(domain, account.pk)
    elif holder is not None and status != verified:
        name, value = tracking.verification_record(account.pk, domain)
        raise ValidationFailed(
            {
                "domain": [
                    "Another account has claimed this domain without proving it. To show "
                    f"it is yours, publish a TXT record {name} with the value {value} (and "
                    f"the CNAME to {settings.TRACKING_DOMAIN_CNAME_TARGET}), then set it again."
                ]
            }
        )


def tracking_domains_check_due(*, now: datetime | None = None, limit: int = 1000) -> int:
    """Beat (hourly): verify again every tracking domain not verified yet (its CNAME and
    its TXT record), and the verified ones checked more than a day ago by their CNAME
    alone (a CNAME removed since stops their use; the TXT record decides who takes a
    domain, not whether the links sent on it answer: a domain verified before it was
    asked for stays verified). A lookup that fails keeps the status it had. Returns the
    number checked."""
    now = now or timezone.now()
    due = (
        Account.objects.exclude(tracking_domain="")
        .exclude(
            tracking_domain_status=Account.TrackingDomainStatus.VERIFIED,
            tracking_domain_checked_at__gt=now - timedelta(hours=24),
        )
        .order_by("tracking_domain_checked_at")
        .values_list("pk", "tracking_domain", "tracking_domain_status")[:limit]
    )
    checked = 0
    for pk, domain, held in due:
        if held == Account.TrackingDomainStatus.VERIFIED:
            status = tracking.tracking_domain_reached(domain)
        else:
            status = tracking.tracking_domain_verify(domain, pk)
        changes: dict = {"tracking_domain_checked_at": now}
        if status is not None:
            changes["tracking_domain_status"] = status
        # Only if the account still has that domain (it may have changed it meanwhile).
        checked += Account.objects.filter(pk=pk, tracking_domain=domain).update(**changes)
    return checked
