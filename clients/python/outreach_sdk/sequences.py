"""Sequences that react: build a campaign's `steps` as a graph, and read one in words.

    from outreach_sdk.sequences import branch, email, describe

    steps = [
        email("intro", subject="Quick question", body_text="Hi {{first_name|there}}, ..."),
        branch("opened_intro", on="opened", of="intro", within_minutes=3 * 24 * 60,
               then="pricing", otherwise="bump"),
        email("pricing", body_text="Here is our pricing ...", delay_minutes=60, next="end"),
        email("bump", body_text="Bumping this up ...", delay_minutes=24 * 60),
    ]
    client.campaigns.create(name="Q4", steps=steps, credential_ids=[...])
    describe(client.campaigns.retrieve(campaign_id).steps)

The builders only shape the JSON: the service checks the graph (keys, targets, cycles,
reachability, limits) and answers validation_failed naming the path (steps.3.then).
"""

from typing import Any

END = "end"

_VERBS = {
    "opened": "open",
    "clicked": "click a link in",
    "opened_or_clicked": "open or click a link in",
}


def email(
    key: str | None = None,
    *,
    body_text: str,
    subject: str = "",
    body_html: str | None = None,
    delay_minutes: int = 0,
    next: str | None = None,  # noqa: A002 - the API's field name
    variants: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """An email step. `next`: a key or "end" (default: the following element). An empty
    subject on a later step replies in the thread."""
    step: dict[str, Any] = {"subject": subject, "body_text": body_text}
    optional = {
        "key": key,
        "body_html": body_html,
        "delay_minutes": delay_minutes or None,
        "next": next,
        "variants": variants,
    }
    step.update({name: value for name, value in optional.items() if value is not None})
    return step


def branch(
    key: str,
    *,
    on: str,
    within_minutes: int,
    then: str,
    otherwise: str,
    of: str | None = None,
) -> dict[str, Any]:
    """A branch: waits up to `within_minutes` for an open or click (`on`: "opened",
    "clicked" or "opened_or_clicked") of the email step `of` ("any": any email; default:
    the last email step before it), then goes to `then`, else to `otherwise` (the API's
    `else`)."""
    condition: dict[str, Any] = {"on": on, "within_minutes": within_minutes}
    if of is not None:
        condition["of"] = of
    return {"key": key, "branch": condition, "then": then, "else": otherwise}


def duration_words(minutes: int) -> str:
    """90 -> "90 minutes", 120 -> "2 hours", 4320 -> "3 days"."""
    for unit, size in (("day", 1440), ("hour", 60)):
        if minutes and minutes % size == 0:
            count = minutes // size
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{minutes} minute{'s' if minutes != 1 else ''}"


def describe(steps: list[dict[str, Any]]) -> list[str]:
    """A campaign's steps as read from the API (keys and `next` resolved), one sentence
    per element, e.g. "After intro, wait up to 3 days: if they open intro, send pricing
    (1 hour later); otherwise send bump (1 day later)." Without keys or branches, a
    straight line: "Start: send step_1 ("Hello") at dispatch; then send step_2 (2 days
    later)." and so on."""
    by_key = {step["key"]: step for step in steps}
    previous: dict[str, str] = {}
    for step in steps:
        for target in _targets(step):
            previous.setdefault(target, step["key"])
    lines = []
    for index, step in enumerate(steps):
        if "branch" in step:
            lines.append(_branch_words(step, by_key, previous))
            continue
        when = "at dispatch" if step.get("delay_minutes", 0) == 0 else None
        if index == 0:
            when = (
                f"{duration_words(step['delay_minutes'])} after dispatch" if when is None else when
            )
            lines.append(f"Start: send {_email_words(step)} {when}; then {_on(step, by_key)}.")
        else:
            lines.append(f"{_email_words(step)}: then {_on(step, by_key)}.")
    return lines


def _targets(step: dict[str, Any]) -> list[str]:
    if "branch" in step:
        return [step["then"], step["else"]]
    return [step.get("next", END)]


def _email_words(step: dict[str, Any]) -> str:
    subject = step.get("subject") or ""
    what = f'"{subject}"' if subject else "a reply in the thread"
    return f"{step['key']} ({what})"


def _go(target: str, by_key: dict[str, dict[str, Any]]) -> str:
    """What happens at `target`, reached from a step or a branch."""
    if target == END:
        return "stop (the sequence ends)"
    step = by_key.get(target, {})
    if "branch" in step:
        return f"wait at {target}"
    delay = step.get("delay_minutes", 0)
    return f"send {target}" + (f" ({duration_words(delay)} later)" if delay else " at once")


def _on(step: dict[str, Any], by_key: dict[str, dict[str, Any]]) -> str:
    return _go(step.get("next", END), by_key)


def _branch_words(
    step: dict[str, Any], by_key: dict[str, dict[str, Any]], previous: dict[str, str]
) -> str:
    condition = step["branch"]
    of = condition.get("of", "any")
    subject = "any email of the sequence" if of == "any" else of
    verb = _VERBS.get(condition["on"], condition["on"])
    after = previous.get(step["key"])
    lead = f"After {after}" if after else f"At {step['key']}"
    return (
        f"{lead}, wait up to {duration_words(condition['within_minutes'])} ({step['key']}): "
        f"if they {verb} {subject}, {_go(step['then'], by_key)}; "
        f"otherwise {_go(step['else'], by_key)}."
    )
