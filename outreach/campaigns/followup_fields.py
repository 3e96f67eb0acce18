"""The follow-up rules of a campaign in the API (docs/outreach.md, "Follow-up
campaigns"): `on_reply` and `on_complete`, their shape, and their checks at save."""

from datetime import datetime
from typing import Any

from rest_framework import serializers

from config.api.serializers import StrictSerializer
from outreach.campaigns.followups import COMPLETE_CONDITIONS, DELAY_MAX_MINUTES
from outreach.models.campaigns import Campaign
from outreach.models.conversations import Reply

MAX_REPLY_RULES = len(Reply.Label.values)
NO_SUCH_CAMPAIGN = "No such campaign."
NOT_ITSELF = "A campaign cannot enrol its contacts in itself."


def _delay_field() -> serializers.IntegerField:
    return serializers.IntegerField(
        min_value=0,
        max_value=DELAY_MAX_MINUTES,
        required=False,
        default=0,
        help_text="Minutes from the trigger to the dispatch (step 1's own delay follows).",
    )


class ReplyRuleSerializer(StrictSerializer):
    """`{label, campaign_id, delay_minutes}`: a reply given `label` enrols its contact in
    `campaign_id`."""

    label = serializers.ChoiceField(choices=Reply.Label.choices)  # type: ignore[assignment]  # the metaclass takes fields off the class
    campaign_id = serializers.UUIDField()
    delay_minutes = _delay_field()

    def validate_label(self, value: str) -> str:
        if value == Reply.Label.UNSUBSCRIBE_REQUEST:
            raise serializers.ValidationError(
                "A contact who asks to be removed is unsubscribed: no campaign may enrol it."
            )
        return value


class CompleteRuleSerializer(StrictSerializer):
    """`{campaign_id, delay_minutes, if}`: an enrollment ended `completed` without a reply
    enrols its contact in `campaign_id`, when `if` holds."""

    campaign_id = serializers.UUIDField()
    delay_minutes = _delay_field()

    def get_fields(self):
        fields = super().get_fields()
        # `if` is a Python keyword: declared here rather than as a class attribute.
        fields["if"] = serializers.ChoiceField(
            choices=COMPLETE_CONDITIONS,
            required=False,
            default="any",
            help_text="any; opened: it opened an email; clicked: it followed a link; "
            "not_opened: it opened none.",
        )
        return fields


def _stored(rule: dict[str, Any]) -> dict[str, Any]:
    return {**rule, "campaign_id": str(rule["campaign_id"])}


def reply_rules_check(rules: list[dict], *, account, campaign: Campaign | None) -> list[dict]:
    """The rules as stored, or a ValidationError naming each bad one's field by index:
    a campaign that is not the account's (or this one), a label given twice."""
    owned = _owned(account, [rule["campaign_id"] for rule in rules])
    errors: dict[Any, dict[str, list[str]]] = {}
    seen: set[str] = set()
    for index, rule in enumerate(rules):
        problem = _target_problem(rule["campaign_id"], owned, campaign)
        if problem:
            errors.setdefault(index, {})["campaign_id"] = [problem]
        if rule["label"] in seen:
            errors.setdefault(index, {})["label"] = ["Another rule has this label."]
        seen.add(rule["label"])
    if errors:
        raise serializers.ValidationError(errors)
    return [_stored(rule) for rule in rules]


def complete_rule_check(rule: dict | None, *, account, campaign: Campaign | None) -> dict | None:
    """The rule as stored (without its `since`: on_complete_stored), or a ValidationError."""
    if rule is None:
        return None
    owned = _owned(account, [rule["campaign_id"]])
    problem = _target_problem(rule["campaign_id"], owned, campaign)
    if problem:
        raise serializers.ValidationError({"campaign_id": [problem]})
    return _stored(rule)


def on_complete_stored(rule: dict | None, *, current: dict | None, now: datetime) -> dict | None:
    """The on_complete rule to store: with `since`, the time from which it acts (only
    enrollments completed from then on follow it). A rule saved again unchanged keeps
    its `since`; a new or changed one starts now."""
    if rule is None:
        return None
    if current and {k: v for k, v in current.items() if k != "since"} == rule:
        return {**rule, "since": current.get("since") or now.isoformat()}
    return {**rule, "since": now.isoformat()}


def _owned(account, ids: list) -> set[str]:
    return {
        str(pk)
        for pk in Campaign.objects.filter(account=account, pk__in=ids).values_list("pk", flat=True)
    }


def _target_problem(target, owned: set[str], campaign: Campaign | None) -> str | None:
    # Another account's campaign reads as one that does not exist (SPEC.md section 5.4).
    if campaign is not None and str(target) == str(campaign.pk):
        return NOT_ITSELF
    if str(target) not in owned:
        return NO_SUCH_CAMPAIGN
    return None
