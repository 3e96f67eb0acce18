"""The recipient domain cap in force, and its per-day counts: locked and reserved by the
send scheduler, given back by claims that did not send, purged after their day."""

from collections import Counter
from collections.abc import Iterable
from datetime import date, timedelta
from uuid import UUID

from django.db.models import Case, CharField, F, Func, Value, When
from django.db.models.functions import Greatest

from outreach.domains.consumer import CONSUMER_MAIL_DOMAINS
from outreach.models.domain_cap import RecipientDomainCount

# Days of counts kept after their own (a claim of yesterday may still give back a unit).
KEPT_DAYS = 2


def cap_in_force(campaign_cap: int | None, account_default: int | None) -> int | None:
    """Sends a day per recipient domain: the campaign's, else the account's, else None
    (no cap)."""
    return campaign_cap if campaign_cap is not None else account_default


def capped_domain(email_lower: str) -> str | None:
    """The domain of an address, or None for a consumer mail domain (never capped)."""
    domain = email_lower.rpartition("@")[2]
    return None if not domain or domain in CONSUMER_MAIL_DOMAINS else domain


def counts_lock(keys: Iterable[tuple[UUID, str]], day: date) -> dict[tuple[UUID, str], list]:
    """The count rows of `day` for (account id, domain) `keys`, made if missing, locked:
    {key: [row id, count]}. A row another transaction holds (a scheduler run, a claim
    giving its unit back) is left out: its sends wait for a later run, nothing waits."""
    keys = set(keys)
    if not keys:
        return {}
    RecipientDomainCount.objects.bulk_create(
        [RecipientDomainCount(account_id=a, domain=d, day=day) for a, d in sorted(keys)],
        ignore_conflicts=True,
    )
    rows = (
        RecipientDomainCount.objects.filter(
            account_id__in={a for a, _ in keys}, domain__in={d for _, d in keys}, day=day
        )
        .order_by("pk")
        .select_for_update(skip_locked=True)
        .values_list("pk", "account_id", "domain", "count")
    )
    return {(a, d): [pk, count] for pk, a, d, count in rows if (a, d) in keys}


def caps_lock(rows: Iterable[tuple], *, day: date) -> dict:
    """The cap of each send under one, for the scheduler: `rows` are (enrollment id, its
    campaign with `account_cap` annotated, lower-cased address); returns {enrollment id:
    (cap, [count row id, count] or None when another transaction holds that row)}, the
    day's rows locked (counts_lock). No query when no cap is in force."""
    wanted = {}
    for enrollment_id, campaign, email_lower in rows:
        cap = cap_in_force(campaign.max_per_recipient_domain_per_day, campaign.account_cap)
        domain = capped_domain(email_lower) if cap is not None else None
        if domain is not None:
            wanted[enrollment_id] = (cap, (campaign.account_id, domain))
    if not wanted:
        return {}
    counts = counts_lock([key for _, key in wanted.values()], day)
    return {pk: (cap, counts.get(key)) for pk, (cap, key) in wanted.items()}


def cap_turn(capped: tuple) -> bool | int | None:
    """Whether a send under `capped` (a value of caps_lock: a send without one is under
    no cap) may be claimed now: the count row's id (a unit taken from it), False (the day
    is full), or None (the row is held elsewhere: a later run)."""
    cap, counted = capped
    if counted is None:
        return None
    if counted[1] >= cap:
        return False
    counted[1] += 1
    return counted[0]


def counts_reserve(reserved: Counter) -> None:
    """Add the units reserved this run ({row id: units}): one UPDATE per distinct number
    of units (usually one or two), the rows locked by counts_lock."""
    by_units: dict[int, list[int]] = {}
    for pk, units in reserved.items():
        by_units.setdefault(units, []).append(pk)
    for units, ids in by_units.items():
        RecipientDomainCount.objects.filter(pk__in=ids).update(count=F("count") + units)


def counts_release(count_ids: Iterable[int | None]) -> None:
    """Give back one unit per claim that did not send (its `domain_count_id`; None for a
    claim outside any cap): the day's count it was taken from, never below zero."""
    units = Counter(pk for pk in count_ids if pk is not None)
    if not units:
        return
    if len(units) == 1:
        ((pk, n),) = units.items()
        RecipientDomainCount.objects.filter(pk=pk).update(count=Greatest(F("count") - n, 0))
        return
    # In id order, as the scheduler locks them.
    less = Case(*(When(pk=pk, then=Value(n)) for pk, n in sorted(units.items())), default=0)
    RecipientDomainCount.objects.filter(pk__in=sorted(units)).update(
        count=Greatest(F("count") - less, 0)
    )


def counts_purge(*, today: date) -> int:
    """Delete the counts of days past (but the last KEPT_DAYS). Returns how many."""
    return RecipientDomainCount.objects.filter(day__lt=today - timedelta(days=KEPT_DAYS)).delete()[
        0
    ]


def domain_counts(
    *, account_id: UUID, day: date, at_least: int = 1, domains: Iterable[str] | None = None
) -> dict[str, int]:
    """The account's sends per recipient domain on `day` (the sending status): the domains
    with at least `at_least` of them, among `domains` when given."""
    rows = RecipientDomainCount.objects.filter(account_id=account_id, day=day, count__gte=at_least)
    if domains is not None:
        domains = list(domains)
        if not domains:
            return {}
        rows = rows.filter(domain__in=domains)
    return dict(rows.values_list("domain", "count"))


def enrollments_at_domains(enrollments, domains: Iterable[str]) -> list[tuple]:
    """(credential id, domain) of the `enrollments` (a queryset) whose contact's address
    is at one of `domains`: one query, distinct pairs."""
    domain = Func(
        F("contact__email_lower"),
        Value("@([^@]*)$"),
        function="substring",
        output_field=CharField(),
    )
    return list(
        enrollments.annotate(domain=domain)
        .filter(domain__in=list(domains))
        .values_list("credential_id", "domain")
        .distinct()
    )
