"""What a reply's label does beyond the reply: the on_reply rule of its campaign
(outreach.campaigns.followups) and the reply events (docs/webhooks.md).

A label set on a reply (by the intake's rules, or through the API) fires the campaign's
on_reply rule for that label, once per enrollment and rule, and the reply shows what
the rule did (`rule_outcomes`, one entry per label and campaign). Called inside the
transaction that sets the label, so the label, the enrollment in the target campaign,
the outcome and the events commit together.
"""

from datetime import datetime

from outreach.campaigns.followups import reply_rule, reply_rule_of, rule_fire
from outreach.conversations.serializers import ReplySerializer
from outreach.events import reply_labelled_emit, reply_received_emit
from outreach.models.campaigns import Campaign
from outreach.models.conversations import Reply
from outreach.models.sending import Enrollment

_BODIES = ("text", "new_text", "html")


def reply_rules_apply(reply: Reply, *, now: datetime) -> None:
    """Fire the reply's campaign's on_reply rule for its label, if there is one, and
    record the outcome on the reply (in memory too). The reply's row is the caller's:
    locked, or made in this transaction."""
    if not reply.label:
        return
    campaign = Campaign.objects.only("account_id", "on_reply").get(pk=reply.campaign_id)
    rule = reply_rule_of(campaign, reply.label)
    if rule is None:
        return
    enrollment = Enrollment.objects.select_related("campaign").get(pk=reply.enrollment_id)
    fired = rule_fire(
        enrollment=enrollment,
        rule=reply_rule(reply.label),
        target_id=rule["campaign_id"],
        delay_minutes=rule.get("delay_minutes", 0),
        now=now,
    )
    if fired is None:
        return
    entry = {"label": reply.label, "campaign_id": str(fired.campaign_id), "outcome": fired.outcome}
    outcomes = list(reply.rule_outcomes or [])
    if any(
        o["label"] == entry["label"] and o["campaign_id"] == entry["campaign_id"] for o in outcomes
    ):
        return
    outcomes.append(entry)
    Reply.objects.filter(pk=reply.pk).update(rule_outcomes=outcomes, updated_at=now)
    reply.rule_outcomes = outcomes


def reply_labelled(reply: Reply, *, now: datetime) -> None:
    """A label was set on `reply` through the API (its row updated): its rule fires,
    then reply.labelled."""
    reply_rules_apply(reply, now=now)
    reply_labelled_emit(reply=reply)


def reply_event_data(reply: Reply) -> dict:
    """The `data` of reply.received: the reply as the API shows it, without its bodies."""
    data = dict(ReplySerializer(reply).data)
    for name in _BODIES:
        data.pop(name, None)
    return data


def reply_kept(reply: Reply, *, now: datetime, act: bool) -> None:
    """A message the intake just kept (and labelled): its label's rule fires (when
    `act`: a verified sender's), then reply.received and, with a label, reply.labelled."""
    if reply.label and act:
        reply_rules_apply(reply, now=now)
    reply_received_emit(account_id=reply.account_id, data=reply_event_data(reply))
    if reply.label:
        reply_labelled_emit(reply=reply)
