"""Follow-up campaigns (docs/outreach.md, "Follow-up campaigns"): a campaign's rules that
enrol a contact in another campaign of the account, `on_reply` (a reply given a label)
and `on_complete` (an enrollment that ends `completed` without a reply).

A rule acts once per enrollment: `rule_fire` writes a RuleFire row, unique on
(enrollment, rule), in the transaction that enrols the contact, so a label set twice, a
completion seen by two workers, or two requests at once enrol the contact once. The
target campaign's row is locked first, as a dispatch locks it: its dispatches and its
deletion wait for the fire, and the soft cap is read under the same lock.

What a fire does with the contact (`FireOutcome`):

- already in the target campaign (in any status): it stays as it is, `already_enrolled`;
- unsubscribed or bounced: never enrolled again, `suppressed`; on the account's
  blocklist: not enrolled, `blocked`;
- otherwise enrolled, then dispatched as `POST /campaigns/:id/dispatch` would, step 1
  due `delay_minutes` after the trigger plus step 1's own delay (`enrolled`), except:
  a draft target keeps it `pending` until the campaign is dispatched (`pending_draft`:
  a draft is still being written); a target that cannot send (no step, no enabled
  mailbox) keeps it `pending` (`pending_not_sendable`); the plan's soft cap reached
  keeps it `pending` (`pending_over_cap`, SPEC.md section 4 rule 11). A paused target
  keeps the enrollment scheduled until it is resumed; a completed one is active again,
  as a dispatch makes it.
"""

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta
from uuid import UUID

from celery import current_app
from django.db import transaction
from django.db.models import DateTimeField, Exists, F, OuterRef, Q, UUIDField
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast
from django.utils import timezone

from billing.usage import usage_record_current
from outreach.blocklist.selectors import blocked_among
from outreach.campaigns.dispatch import sends_schedule_soon
from outreach.campaigns.state import campaign_activate, enabled_credential_exists
from outreach.campaigns.windows import SendWindow, step_send_at, window_timezone
from outreach.enrollments import campaign_delete as enrollments_campaign_delete
from outreach.enrollments import enrollment_enroll, enrollment_schedule
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment
from outreach.models.sequences import RuleFire

logger = logging.getLogger(__name__)

RULE_COMPLETE = "complete"
# The on_complete conditions, on the ended enrollment.
COMPLETE_CONDITIONS = ("any", "opened", "clicked", "not_opened")
DELAY_MAX_MINUTES = 366 * 24 * 60
# The task that fires on_complete for enrollments just completed (tasks.py).
COMPLETE_TASK = "outreach.tasks.followups_complete"


FireOutcome = RuleFire.Outcome


def reply_rule(label: str) -> str:
    """The RuleFire.rule of an on_reply rule."""
    return f"reply:{label}"


@dataclass(frozen=True)
class Fired:
    """What a rule did for one enrollment (this call's fire, or an earlier one's)."""

    campaign_id: UUID
    outcome: str
    new: bool  # this call fired it


def rule_fire(
    *,
    enrollment: Enrollment,
    rule: str,
    target_id,
    delay_minutes: int,
    now: datetime,
    trigger_at: datetime | None = None,
) -> Fired | None:
    """Fire `rule` of `enrollment`'s campaign for its contact into campaign `target_id`,
    once: an earlier fire of the same rule is returned as it was. The dispatch is
    `delay_minutes` after `trigger_at` (default `now`; never before now). None when the
    target is no campaign of the account (deleted since the rule was saved)."""
    with transaction.atomic():
        target = (
            Campaign.objects.select_for_update(no_key=True)
            .select_related("account")
            .filter(pk=target_id, account_id=enrollment.campaign.account_id)
            .first()
        )
        if target is None:
            return None
        fire, created = RuleFire.objects.get_or_create(
            enrollment_id=enrollment.pk,
            rule=rule,
            defaults={"campaign_id": target.pk, "outcome": FireOutcome.ENROLLED},
        )
        if not created:
            return Fired(campaign_id=fire.campaign_id, outcome=fire.outcome, new=False)
        dispatch_at = max(now, (trigger_at or now) + timedelta(minutes=delay_minutes))
        outcome = _contact_enrol(
            target, contact_id=enrollment.contact_id, dispatch_at=dispatch_at, now=now
        )
        if outcome != fire.outcome:
            RuleFire.objects.filter(pk=fire.pk).update(outcome=outcome)
    logger.info("follow-up %s of enrollment %s: %s", rule, enrollment.pk, outcome)
    return Fired(campaign_id=target.pk, outcome=outcome, new=True)


def _contact_enrol(target: Campaign, *, contact_id, dispatch_at: datetime, now: datetime) -> str:
    """Enrol the contact in the locked `target` and dispatch it (module docstring)."""
    contact = Contact.objects.get(pk=contact_id)
    if Enrollment.objects.filter(campaign_id=target.pk, contact_id=contact_id).exists():
        return FireOutcome.ALREADY_ENROLLED
    if contact.is_suppressed:
        return FireOutcome.SUPPRESSED
    if blocked_among(account_id=target.account_id, emails=[contact.email_lower]):
        return FireOutcome.BLOCKED
    enrollment, created = enrollment_enroll(campaign_id=target.pk, contact_id=contact_id)
    if not created:  # an import enrolled it since the check above
        return FireOutcome.ALREADY_ENROLLED
    if target.status == Campaign.Status.DRAFT:
        return FireOutcome.PENDING_DRAFT
    first_step = target.steps.order_by("position").first()
    if first_step is None or not enabled_credential_exists(target):
        return FireOutcome.PENDING_NOT_SENDABLE
    usage = usage_record_current(account=target.account, at=now)
    if usage.sends_count >= target.account.plan.monthly_limit:
        return FireOutcome.PENDING_OVER_CAP
    send_at = step_send_at(
        after=dispatch_at,
        delay_minutes=first_step.delay_minutes,
        timezone=window_timezone(campaign=target, contact_timezone=contact.timezone),
        window=SendWindow.from_json(target.send_window),
    )
    enrollment_schedule(enrollment, next_send_at=send_at, now=now)
    campaign_activate(campaign=target, at=now)
    if send_at <= now:
        transaction.on_commit(sends_schedule_soon, robust=True)
    return FireOutcome.ENROLLED


# --- on_reply --------------------------------------------------------------------------


def reply_rule_of(campaign: Campaign, label: str) -> dict | None:
    """The campaign's on_reply rule for `label`, or None."""
    for rule in campaign.on_reply or ():
        if rule.get("label") == label:
            return rule
    return None


# --- on_complete -----------------------------------------------------------------------


def complete_condition_met(enrollment: Enrollment, condition: str) -> bool:
    if condition == "opened":
        return enrollment.opened_at is not None
    if condition == "clicked":
        return enrollment.clicked_at is not None
    if condition == "not_opened":
        return enrollment.opened_at is None
    return True


def complete_rule_fire(*, enrollment_id, now: datetime) -> Fired | None:
    """Fire the on_complete rule of a completed enrollment's campaign, when the
    enrollment ended `completed` without a reply, after the rule was set (its `since`),
    and its condition holds. Once (rule_fire); None when it does not apply."""
    enrollment = (
        Enrollment.objects.select_related("campaign")
        .filter(pk=enrollment_id, status=Enrollment.Status.COMPLETED, replied_at__isnull=True)
        .first()
    )
    if enrollment is None or enrollment.completed_at is None:
        return None
    rule = enrollment.campaign.on_complete
    if not rule or not complete_condition_met(enrollment, rule.get("if", "any")):
        return None
    since = rule.get("since")
    if since and enrollment.completed_at < datetime.fromisoformat(since):
        return None
    return rule_fire(
        enrollment=enrollment,
        rule=RULE_COMPLETE,
        target_id=rule["campaign_id"],
        delay_minutes=rule.get("delay_minutes", 0),
        now=now,
        trigger_at=enrollment.completed_at,
    )


def completed_followups_enqueue(*, campaign: Campaign, enrollment_ids: list) -> None:
    """After the commit of enrollments' completion: fire their campaign's on_complete
    rule in a task (the fast path). A lost task, a broker down, a worker killed after
    the commit: the beat sweep (followups_sweep) fires what is missing. Never raises."""
    if campaign.on_complete and enrollment_ids:
        _complete_task_enqueue([str(pk) for pk in enrollment_ids])


def completions_followup(enrollments: list[Enrollment]) -> None:
    """completed_followups_enqueue for enrollments of any campaigns (their campaign_id
    read): one query for the campaigns with an on_complete rule, one task."""
    campaign_ids = {e.campaign_id for e in enrollments}
    if not campaign_ids:
        return
    with_rule = set(
        Campaign.objects.filter(pk__in=campaign_ids, on_complete__isnull=False).values_list(
            "pk", flat=True
        )
    )
    ids = [str(e.pk) for e in enrollments if e.campaign_id in with_rule]
    if ids:
        _complete_task_enqueue(ids)


def _complete_task_enqueue(ids: list[str]) -> None:

    def enqueue() -> None:
        try:
            current_app.signature(COMPLETE_TASK).apply_async((ids,), retry=False)
        except Exception:
            logger.warning("on_complete task not sent; the sweep fires it", exc_info=True)

    transaction.on_commit(enqueue, robust=True)


# The sweep: completions whose fast path was lost, found among those of the last
# SWEEP_WINDOW (enrollment_completed_idx), once their task had SWEEP_GRACE to run.
SWEEP_WINDOW = timedelta(days=2)
SWEEP_GRACE = timedelta(minutes=1)
SWEEP_BATCH = 500
SWEEP_MAX_BATCHES = 20  # per run: the rest waits for the next one


def _condition_holds() -> Q:
    """An on_complete condition, in SQL, on the enrollment and its campaign's rule."""
    rule = "campaign__on_complete__if"
    return (
        Q(**{rule: "any"})
        | Q(**{rule: "opened"}, opened_at__isnull=False)
        | Q(**{rule: "clicked"}, clicked_at__isnull=False)
        | Q(**{rule: "not_opened"}, opened_at__isnull=True)
    )


def completions_unfired(*, now: datetime, limit: int = SWEEP_BATCH) -> list:
    """Ids of enrollments completed in the sweep's window, without a reply, in a campaign
    whose on_complete rule (set before the completion) holds for them and has not fired."""
    since = Cast(KeyTextTransform("since", "campaign__on_complete"), DateTimeField())
    fired = RuleFire.objects.filter(enrollment_id=OuterRef("pk"), rule=RULE_COMPLETE)
    # A target gone without its rule (deleted outside campaign_delete) is no work: it
    # would be found again at every run.
    target = Campaign.objects.filter(
        pk=Cast(KeyTextTransform("campaign_id", OuterRef("campaign__on_complete")), UUIDField()),
        account_id=OuterRef("campaign__account_id"),
    )
    return list(
        Enrollment.objects.filter(
            _condition_holds(),
            status=Enrollment.Status.COMPLETED,
            completed_at__gte=now - SWEEP_WINDOW,
            completed_at__lte=now - SWEEP_GRACE,
            replied_at__isnull=True,
            campaign__on_complete__isnull=False,
        )
        .annotate(rule_since=since)
        .filter(Q(rule_since__isnull=True) | Q(completed_at__gte=F("rule_since")))
        .filter(Exists(target))
        .exclude(Exists(fired))
        .order_by("completed_at")
        .values_list("pk", flat=True)[:limit]
    )


def followups_sweep(*, now: datetime) -> int:
    """Fire the on_complete rules the fast path missed, up to SWEEP_MAX_BATCHES batches.
    Idempotent: each fire is once per enrollment (rule_fire). Returns how many fired."""
    fired = 0
    for _batch in range(SWEEP_MAX_BATCHES):
        ids = completions_unfired(now=now)
        batch = 0
        for enrollment_id in ids:
            result = complete_rule_fire(enrollment_id=enrollment_id, now=now)
            batch += bool(result and result.new)
        fired += batch
        # A batch that fired nothing would be found again: the next run tries it.
        if len(ids) < SWEEP_BATCH or not batch:
            break
    return fired


def followup_rules_drop(*, account_id, campaign_id, now: datetime) -> int:
    """The rules of the account's campaigns that name `campaign_id` (being deleted) are
    dropped: a rule never points at a campaign that is gone. Returns how many campaigns
    changed."""
    target = str(campaign_id)
    naming = (
        Campaign.objects.select_for_update(no_key=True)
        .filter(account_id=account_id)
        .filter(
            Q(on_reply__contains=[{"campaign_id": target}]) | Q(on_complete__campaign_id=target)
        )
        .exclude(pk=campaign_id)
        .order_by("pk")
    )
    changed = 0
    with transaction.atomic():
        for campaign in naming:
            on_reply = [r for r in campaign.on_reply or () if r.get("campaign_id") != target]
            on_complete = campaign.on_complete
            if on_complete and on_complete.get("campaign_id") == target:
                on_complete = None
            Campaign.objects.filter(pk=campaign.pk).update(
                on_reply=on_reply, on_complete=on_complete, updated_at=now
            )
            changed += 1
    return changed


def campaign_delete(*, account_id, campaign_id) -> None:
    """Delete a campaign (through the transition that leaves the tombstones its sent
    emails' unsubscribe links need) and, in the same transaction, the follow-up rules of
    the account's other campaigns that name it."""
    with transaction.atomic():
        followup_rules_drop(account_id=account_id, campaign_id=campaign_id, now=timezone.now())
        enrollments_campaign_delete(campaign_id=campaign_id)
