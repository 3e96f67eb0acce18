"""A campaign's `steps` in the API (API.md 2 and 17): email steps (subject, bodies, A/B
variants, delay, `key`, `next`) and branches (`{key, branch: {on, of, within_minutes},
then, else}`), read and written. The graph's rules are outreach.campaigns.graph's;
`steps_validate` applies them at save (POST and PATCH /campaigns, the edit preview)."""

from collections.abc import Mapping
from typing import Any, cast

from rest_framework import serializers

from config.api.serializers import StrictSerializer
from outreach.campaigns import graph
from outreach.campaigns.rendering import template_errors
from outreach.campaigns.variants import MAX_EXTRA_VARIANTS, step_content, step_letters
from outreach.models.campaigns import Campaign

KEY_HELP = (
    "[a-z0-9_]{1,40}, unique in the campaign; default step_<n>, n the element's 1-based "
    "position in steps (branches counted). A live edit matches elements by key."
)
TARGET_HELP = 'A key of the campaign, or "end".'
# What a branch element takes besides `branch` (everything else is an email step's).
BRANCH_FIELDS = {"key", "branch", "then", "else"}
EMAIL_ONLY = ("subject", "body_text", "body_html", "delay_minutes", "variants", "next")


def _indexed(errors: dict[int, Any]) -> dict[str, Any]:
    """Errors keyed by list index, as DRF takes them (it renders the keys as strings);
    its stubs allow string keys alone."""
    return cast(dict[str, Any], errors)


def _template_validator(*, body: bool):
    """A field validator for a subject (`body` false) or a body part's template."""

    def validate(value: str) -> str:
        problems = template_errors(value, body=body)
        if problems:
            raise serializers.ValidationError(problems)
        return value

    return validate


class StepContentSerializer(StrictSerializer):
    """A step's subject and bodies: the step's own (variant A) and each of its variants."""

    subject = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=998,
        trim_whitespace=False,
        validators=[_template_validator(body=False)],
    )
    body_text = serializers.CharField(
        trim_whitespace=False, validators=[_template_validator(body=True)]
    )
    body_html = serializers.CharField(
        required=False,
        allow_blank=True,
        allow_null=True,
        default="",
        trim_whitespace=False,
        validators=[_template_validator(body=True)],
    )

    def validate(self, attrs):
        attrs["body_html"] = attrs.get("body_html") or ""
        return attrs


class VariantSerializer(StepContentSerializer):
    variant = serializers.CharField(
        read_only=True, help_text="B, C, ...: the step's own content is variant A."
    )


class BranchConditionSerializer(StrictSerializer):
    on = serializers.ChoiceField(choices=graph.BRANCH_ON)
    of = serializers.CharField(
        required=False,
        max_length=40,
        help_text='The email step whose open or click decides, or "any" (any email the '
        "enrollment was sent). Default: the last email step before the branch.",
    )
    within_minutes = serializers.IntegerField(min_value=1, max_value=graph.WITHIN_MINUTES_MAX)


class StepSerializer(StepContentSerializer):
    """An element of `steps`: an email step, or a branch (`branch` given: then only
    key, branch, then and else)."""

    key = serializers.RegexField(
        graph.KEY_PATTERN, required=False, max_length=40, help_text=KEY_HELP
    )
    # Required of an email step only (checked in to_internal_value).
    body_text = serializers.CharField(
        required=False, trim_whitespace=False, validators=[_template_validator(body=True)]
    )
    delay_minutes = serializers.IntegerField(
        min_value=0, max_value=366 * 24 * 60, required=False, default=0
    )
    variants = serializers.ListField(
        child=VariantSerializer(),
        required=False,
        default=list,
        max_length=MAX_EXTRA_VARIANTS,
        help_text=f"A/B variants besides the step's own content, at most {MAX_EXTRA_VARIANTS}.",
    )
    next = serializers.CharField(
        required=False,
        max_length=40,
        help_text=f"An email step's next element. {TARGET_HELP} Default: the following "
        'element, "end" after the last.',
    )
    branch = BranchConditionSerializer(
        required=False,
        help_text="Makes the element a branch: it sends nothing and waits up to "
        "within_minutes for the open or click, then goes to `then`, else to `else`.",
    )
    then = serializers.CharField(
        required=False, max_length=40, help_text=f"A branch's way on after the event. {TARGET_HELP}"
    )

    def get_fields(self):
        fields = super().get_fields()
        # `else` is a Python keyword: declared here rather than as a class attribute.
        fields["else"] = serializers.CharField(
            required=False,
            max_length=40,
            help_text=f"A branch's way on when the deadline passes first. {TARGET_HELP}",
        )
        return fields

    def to_internal_value(self, data):
        problems = _shape_problems(data) if isinstance(data, Mapping) else {}
        try:
            value = super().to_internal_value(data)
        except serializers.ValidationError as exc:
            if not problems or not isinstance(exc.detail, dict):
                raise
            raise serializers.ValidationError({**problems, **exc.detail}) from None
        if problems:
            raise serializers.ValidationError(problems)
        if "branch" in value:
            return {name: value[name] for name in BRANCH_FIELDS if name in value}
        return value

    def validate(self, attrs):
        if "branch" in attrs:
            return attrs
        return super().validate(attrs)

    def to_representation(self, instance):
        return step_representation(instance, next_key=getattr(instance, "next_key", ""))


def _shape_problems(data: Mapping) -> dict[str, list[str]]:
    """Fields that do not belong to the element's kind, and those it lacks."""
    problems: dict[str, list[str]] = {}
    if "branch" in data:
        for name in EMAIL_ONLY:
            if name in data:
                problems[name] = [f"A branch has no {name}: it sends nothing."]
        if "next" in data:
            problems["next"] = ["A branch leads on by then and else, not next."]
        for name in ("then", "else"):
            if name not in data:
                problems[name] = [f"A branch needs {name}. {TARGET_HELP}"]
        return problems
    for name in ("then", "else"):
        if name in data:
            problems[name] = ["Only a branch has then and else (give branch too)."]
    if "body_text" not in data:
        problems["body_text"] = ["This field is required."]
    return problems


def step_representation(instance, *, next_key: str) -> dict:
    """An element as the API shows it: a CampaignStep, or any object with its attributes
    (a row of selectors.campaigns_with_relations); `next_key` its resolved next (an
    email step's)."""
    branch = getattr(instance, "branch", None)
    key = getattr(instance, "key", "") or graph.default_key(instance.position)
    if branch is not None:
        return {
            "key": key,
            "branch": {
                "on": branch["on"],
                "of": branch["of"],
                "within_minutes": branch["within_minutes"],
            },
            "then": branch["then"],
            "else": branch["else"],
        }
    letters = step_letters(instance)
    return {
        "key": key,
        "subject": instance.subject,
        "body_text": instance.body_text,
        "body_html": instance.body_html or None,
        "delay_minutes": instance.delay_minutes,
        "variants": [
            {
                "variant": letter,
                "subject": content.subject,
                "body_text": content.body_text,
                "body_html": content.body_html or None,
            }
            for letter in letters[1:]
            for content in [step_content(instance, letter)]
        ],
        "next": next_key or graph.END,
    }


def steps_representation(rows) -> list[dict]:
    """The elements in order, each `next` resolved (outreach.campaigns.graph)."""
    rows = sorted(rows, key=lambda row: row.position)
    resolved = {e.position: e.next for e in graph.elements_from_rows(rows)}
    return [step_representation(row, next_key=resolved[row.position]) for row in rows]


# --- at save --------------------------------------------------------------------------


def _nested(errors: graph.Errors) -> dict:
    """{(3, "then"): [...]} as DRF's nested detail: {3: {"then": [...]}} (rendered
    steps.3.then by the error handler)."""
    nested: dict = {}
    for path, messages in errors.items():
        if not path:
            return {"non_field_errors": messages}
        node = nested
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = messages
    return nested


def steps_validate(steps: list[dict], *, instance: Campaign | None) -> list[dict]:
    """A request's steps checked as a graph and resolved: each with its `key`, an email
    step with `next_key`, a branch with `branch` in its stored form. Raises
    ValidationError naming the path (steps.3.then)."""
    elements, errors = graph.elements_resolve(steps)
    if errors:
        detail = _nested(errors)
        if "non_field_errors" in detail:
            raise serializers.ValidationError(detail["non_field_errors"])
        raise serializers.ValidationError(_indexed(detail))
    _subjects_check(steps)
    if not steps and instance is not None and instance.status != Campaign.Status.DRAFT:
        raise serializers.ValidationError(f"A {instance.status} campaign keeps at least one step.")
    resolved = []
    for step, element in zip(steps, elements, strict=True):
        if element.branch is not None:
            resolved.append({"key": element.key, "branch": dict(element.branch)})
        else:
            resolved.append({**step, "key": element.key, "next_key": element.next})
    return resolved


def _subjects_check(steps: list[dict]) -> None:
    if steps and not steps[0].get("subject", "").strip():
        raise serializers.ValidationError(
            _indexed({0: {"subject": ["The first step needs a subject."]}})
        )
    if steps:
        untitled = {
            index: {"subject": ["The first step needs a subject, in every variant."]}
            for index, variant in enumerate(steps[0].get("variants") or [])
            if not variant.get("subject", "").strip()
        }
        if untitled:
            raise serializers.ValidationError(_indexed({0: {"variants": _indexed(untitled)}}))


# --- the edit preview -----------------------------------------------------------------


class StepsPreviewSerializer(StrictSerializer):
    """POST /campaigns/:id/steps/preview: the steps a PATCH would give, checked as the
    PATCH checks them (the same 422)."""

    steps = StepSerializer(many=True)

    def validate_steps(self, steps):
        return steps_validate(steps, instance=self.context["campaign"])


class MoveSerializer(StrictSerializer):
    from_key = serializers.CharField()
    to_key = serializers.CharField(help_text='A key of the new steps, or "end" (completed).')
    enrollments = serializers.IntegerField(help_text="How many enrollments wait at from_key.")


class StepsPreviewResultSerializer(StrictSerializer):
    moves = MoveSerializer(many=True)
