"""The circuit breaker per mailbox and recipient provider (API.md 20;
docs/deliverability.md, "The circuit breaker").

    strike_from_reply(credential=..., email="ada@acme.example", code=550,
                      text="5.7.26 This mail has been blocked ...", at=now)

A strike is a `block` refusal (outreach.bounce_types: the sender refused, not the
address), synchronous or reported later, or a 4.7.x temporary answer (rate or reputation
limits). In the strike's transaction, the mailbox's row locked (so two strikes at once
count each other):
1. the strike is kept (ProviderStrike) and the pair's strikes older than the window
   forgotten;
2. while the pair is paused, a strike (a message already in flight) changes nothing;
3. STRIKES_TO_PAUSE strikes within STRIKE_WINDOW, after the end of the pair's last
   pause, pause the pair: FIRST_PAUSE, doubled by each further pause up to
   LONGEST_PAUSE; the doubling is forgotten after DOUBLING_MEMORY without a pause;
4. `credential.throttled` (opt-in) is emitted with the pause.

The scheduler reads the pauses in force once per run (`pauses_in_force`) and holds the
steps of a paused pair (outreach.sending.scheduler); a batch in flight holds the rest of
its claims toward a provider paused under it (outreach.sending.batch).
"""

import logging
from datetime import datetime, timedelta

from django.db import transaction

from outreach.bounce_types import BLOCK, BounceClass, classify
from outreach.domains.providers import recipient_domain, recipient_provider
from outreach.events import credential_throttled_emit
from outreach.models.mailboxes import SmtpCredential
from outreach.models.reputation import ProviderPause, ProviderStrike, ThrottleReason

logger = logging.getLogger(__name__)

STRIKES_TO_PAUSE = 3
STRIKE_WINDOW = timedelta(hours=1)
FIRST_PAUSE = timedelta(hours=1)
LONGEST_PAUSE = timedelta(hours=24)
DOUBLING_MEMORY = timedelta(hours=24)
DETAIL_MAX_CHARS = 1000


def strike_reason(*, code: int | None, text: str) -> str | None:
    """What a refusal counts as for the breaker: `blocks`, `rate_limited`, or None."""
    return klass_strike(classify(code=code, text=text))


def klass_strike(klass: BounceClass) -> str | None:
    """What a classified refusal counts as for the breaker (strike_reason)."""
    if klass.type == BLOCK:
        return ThrottleReason.BLOCKS.value
    if klass.rate_limited:
        return ThrottleReason.RATE_LIMITED.value
    return None


def strike_from_reply(
    *,
    credential_id,
    email: str,
    code: int | None,
    text: str,
    at: datetime,
    klass: BounceClass | None = None,
) -> ProviderPause | None:
    """A refusal of a message from the mailbox to `email`: a strike when it is one (see
    the module docstring). `klass`: the refusal's class when its reader has it (a
    bounce's, typed by its source), else `code` and `text` are classified. Returns the
    pause it started, if any."""
    klass = klass or classify(code=code, text=text)
    reason = klass_strike(klass)
    if reason is None or credential_id is None:
        return None
    provider = recipient_provider(recipient_domain(email))
    return strike_record(
        credential_id=credential_id, provider=provider, reason=reason, detail=text, at=at
    )


def pause_length(level: int) -> timedelta:
    """The length of the pause at `level` of the doubling (1: the first)."""
    doublings = min(max(level, 1) - 1, 16)  # far past LONGEST_PAUSE already
    return min(FIRST_PAUSE * 2**doublings, LONGEST_PAUSE)


def strike_record(
    *, credential_id, provider: str, reason: str, detail: str, at: datetime
) -> ProviderPause | None:
    """Steps 1 to 4 of the module docstring; the pause started, or None."""
    with transaction.atomic():
        credential = SmtpCredential.objects.select_for_update().filter(pk=credential_id).first()
        if credential is None:
            return None
        pair = {"credential_id": credential_id, "provider": provider}
        ProviderStrike.objects.create(**pair, at=at, reason=reason)
        ProviderStrike.objects.filter(**pair, at__lte=at - STRIKE_WINDOW).delete()
        pause = ProviderPause.objects.filter(**pair).first()
        if pause is not None and pause.until > at:
            return None
        since = at - STRIKE_WINDOW
        if pause is not None:
            since = max(since, pause.until)
        if ProviderStrike.objects.filter(**pair, at__gt=since).count() < STRIKES_TO_PAUSE:
            return None
        level = 1
        if pause is not None and at - pause.until < DOUBLING_MEMORY:
            level = pause.level + 1
        detail = (detail or "").strip()[:DETAIL_MAX_CHARS]
        changes = {
            "paused_at": at,
            "until": at + pause_length(level),
            "level": level,
            "reason": reason,
            "detail": detail,
        }
        pause, _ = ProviderPause.objects.update_or_create(**pair, defaults=changes)
        logger.warning(
            "mailbox %s paused toward %s until %s (%s): %s",
            credential_id,
            provider,
            pause.until.isoformat(),
            reason,
            detail,
        )
        credential_throttled_emit(
            credential=credential,
            provider=provider,
            reason=reason,
            until=pause.until,
            detail=detail,
        )
        return pause


def pauses_in_force(*, now: datetime, credential_ids=None) -> dict[tuple, ProviderPause]:
    """The pauses in force at `now`, by (credential id, provider): one query."""
    rows = ProviderPause.objects.filter(until__gt=now)
    if credential_ids is not None:
        rows = rows.filter(credential_id__in=list(credential_ids))
    return {(p.credential_id, p.provider): p for p in rows}


def pauses_of(credential_id, *, now: datetime) -> dict[str, datetime]:
    """The mailbox's pauses in force, {provider: until}: what a batch in flight holds."""
    return dict(
        ProviderPause.objects.filter(credential_id=credential_id, until__gt=now).values_list(
            "provider", "until"
        )
    )


def held_until(held: dict[str, datetime], email: str) -> datetime | None:
    """When a send to `email` may go, if `held` (pauses_of) holds its provider."""
    return held.get(recipient_provider(recipient_domain(email))) if held else None
