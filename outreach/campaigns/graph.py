"""A campaign's sequence as a graph (API.md 17): the pure rules, no database.

`steps` is a list of elements: email steps, each leading on by `next`, and branches,
each waiting for an open or click and leading on by `then` or `else`. Here:

- `elements_resolve`: the elements a request gave, with every default filled in (keys
  `step_<position>`, an email step's `next` the following element, a branch's `of` the
  last email step before it), and every problem found at save, by path
  (`(3, "then")`: `steps.3.then`);
- `elements_from_rows`: the stored elements (CampaignStep rows, or their JSON), with an
  email step's empty `next_key` (a row made outside the API) read as the following
  element;
- `edit_moves`: where a live edit sends an enrollment that waits at an element the
  edit removes.

A straight line of email steps without keys is the simplest graph: every key its
default, every `next` the following step.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

END = "end"
ANY = "any"
KEY_PATTERN = re.compile(r"\A[a-z0-9_]{1,40}\Z")
BRANCH_ON = ("opened", "clicked", "opened_or_clicked")
MAX_EMAIL_STEPS = 20
MAX_ELEMENTS = 50
WITHIN_MINUTES_MAX = 527_040  # a leap year

Path = tuple[int | str, ...]
Errors = dict[Path, list[str]]


@dataclass(frozen=True)
class Element:
    """One element, resolved. An email step: `next` a key or END, `branch` None. A
    branch: `next` "", `branch` {on, of, within_minutes, then, else}."""

    key: str
    position: int
    next: str = ""
    branch: Mapping[str, Any] | None = None
    delay_minutes: int = 0

    @property
    def is_branch(self) -> bool:
        return self.branch is not None

    def leads_to(self) -> list[tuple[str, str]]:
        """(field, target) of each way on: ("next", k), or ("then", k), ("else", k)."""
        if self.branch is None:
            return [("next", self.next)]
        return [("then", self.branch["then"]), ("else", self.branch["else"])]


def default_key(position: int) -> str:
    return f"step_{position}"


# --- reading the stored graph ----------------------------------------------------------


def elements_from_rows(rows: Iterable[Any]) -> list[Element]:
    """The stored elements in order: CampaignStep rows or objects with their attributes
    (position, key, next_key, branch, delay_minutes)."""
    ordered = sorted(rows, key=lambda row: row.position)
    elements = []
    for index, row in enumerate(ordered):
        key = row.key or default_key(row.position)
        following = ordered[index + 1] if index + 1 < len(ordered) else None
        if row.branch is not None:
            elements.append(Element(key=key, position=row.position, branch=dict(row.branch)))
            continue
        nxt = row.next_key or (
            (following.key or default_key(following.position)) if following else END
        )
        elements.append(
            Element(key=key, position=row.position, next=nxt, delay_minutes=row.delay_minutes)
        )
    return elements


# --- resolving and checking what a request gave -----------------------------------------


def elements_resolve(steps: Sequence[Mapping[str, Any]]) -> tuple[list[Element], Errors]:
    """The elements of a request's `steps` (their shapes already checked), defaults
    filled in, and the problems of the graph they make, by path. The graph's own checks
    (cycles, reachability, `of` before the branch) run only on a graph whose keys and
    targets are sound."""
    errors: Errors = {}
    count = _count_errors(steps)
    if count:
        return [], {(): [count]}
    elements = _defaults_filled(steps, errors)
    if steps and "branch" in steps[0]:
        errors.setdefault((0, "branch"), []).append(
            "The first element must be an email step: a branch waits for what the contact "
            "did with an email sent before it."
        )
    if not errors:  # targets are read against sound keys only
        _targets_check(elements, errors)
    if not errors:
        _cycles_check(elements, errors)
    if not errors:
        _reachability_check(elements, errors)
        _of_check(elements, errors)
    return elements, errors


def _count_errors(steps: Sequence[Mapping[str, Any]]) -> str:
    branches = sum(1 for step in steps if "branch" in step)
    if not branches:
        return f"At most {MAX_EMAIL_STEPS} steps." if len(steps) > MAX_EMAIL_STEPS else ""
    if len(steps) > MAX_ELEMENTS:
        return f"At most {MAX_ELEMENTS} elements (email steps and branches)."
    if len(steps) - branches > MAX_EMAIL_STEPS:
        return f"At most {MAX_EMAIL_STEPS} email steps."
    return ""


def _defaults_filled(steps: Sequence[Mapping[str, Any]], errors: Errors) -> list[Element]:
    """Keys (checked unique), `next` and `of` defaulted. A given `next`, `then`, `else`
    or `of` is kept as given (checked later)."""
    keys = [step.get("key") or default_key(position) for position, step in enumerate(steps, 1)]
    first_at: dict[str, int] = {}
    for index, key in enumerate(keys):
        if key in first_at:
            errors.setdefault((index, "key"), []).append(
                f'"{key}" is the key of steps.{first_at[key]} already: keys are unique '
                "in a campaign (an element without a key gets step_<position>)."
            )
        elif key in (END, ANY):
            errors.setdefault((index, "key"), []).append(
                f'"{key}" is not a key: "end" names the end, "any" any email step.'
            )
        first_at.setdefault(key, index)
    elements = []
    last_email = ""
    for index, step in enumerate(steps):
        position, key = index + 1, keys[index]
        following = keys[index + 1] if index + 1 < len(keys) else END
        branch = step.get("branch")
        if branch is None:
            nxt = step.get("next") or following
            elements.append(Element(key, position, nxt, None, step.get("delay_minutes", 0)))
            last_email = key
            continue
        resolved = {
            "on": branch["on"],
            "of": branch.get("of") or last_email or ANY,
            "within_minutes": branch["within_minutes"],
            "then": step["then"],
            "else": step["else"],
        }
        elements.append(Element(key, position, "", resolved))
    return elements


def _targets_check(elements: list[Element], errors: Errors) -> None:
    by_key = {element.key: element for element in elements}
    for index, element in enumerate(elements):
        for name, target in element.leads_to():
            if target != END and target not in by_key:
                errors.setdefault((index, name), []).append(
                    f'No element has the key "{target}": give a key of this campaign, or "end".'
                )
            elif target == element.key:
                errors.setdefault((index, name), []).append(
                    "An element cannot lead to itself: a contact would get the same step twice."
                )
        if element.branch is None:
            continue
        of = element.branch["of"]
        if of != ANY and (of not in by_key or by_key[of].is_branch):
            errors.setdefault((index, "branch", "of"), []).append(
                f'"{of}" is not an email step of this campaign: name the email step whose '
                'opens or clicks decide, or "any".'
            )


def _cycles_check(elements: list[Element], errors: Errors) -> None:
    """A cycle would send a contact the same step twice: the first way back found is
    named (depth first from each element, in order)."""
    by_key = {element.key: element for element in elements}
    index_of = {element.key: index for index, element in enumerate(elements)}
    state: dict[str, int] = {}  # 1: on the current path, 2: done

    def visit(key: str) -> bool:
        state[key] = 1
        for name, target in by_key[key].leads_to():
            if target == END or state.get(target) == 2:
                continue
            if state.get(target) == 1:
                errors.setdefault((index_of[key], name), []).append(
                    f'This leads back to "{target}", which comes before it: a cycle would '
                    "send a contact the same step twice."
                )
                return True
            if visit(target):
                return True
        state[key] = 2
        return False

    for element in elements:
        if element.key not in state and visit(element.key):
            return


def successors(elements: list[Element]) -> dict[str, list[str]]:
    return {
        element.key: [target for _, target in element.leads_to() if target != END]
        for element in elements
    }


def reachable_from(start: str, elements: list[Element]) -> set[str]:
    """The keys reachable from `start`, itself included."""
    graph = successors(elements)
    seen, stack = {start}, [start]
    while stack:
        for target in graph.get(stack.pop(), []):
            if target not in seen:
                seen.add(target)
                stack.append(target)
    return seen


def _reachability_check(elements: list[Element], errors: Errors) -> None:
    if not elements:
        return
    reached = reachable_from(elements[0].key, elements)
    for index, element in enumerate(elements):
        if element.key not in reached:
            errors.setdefault((index,), []).append(
                f'"{element.key}" is not reachable from the first element: no next, then '
                "or else leads to it."
            )


def _of_check(elements: list[Element], errors: Errors) -> None:
    """A branch's `of` names an email step sent before it on some way to it: one that
    never is would always decide `else`."""
    for index, element in enumerate(elements):
        if element.branch is None or element.branch["of"] == ANY:
            continue
        of = element.branch["of"]
        if element.key not in reachable_from(of, elements):
            errors.setdefault((index, "branch", "of"), []).append(
                f'"{of}" is never sent before this branch: name an email step that leads '
                'to it, or "any".'
            )


# --- live edits -----------------------------------------------------------------------


def edit_moves(old: list[Element], new: list[Element]) -> dict[str, str]:
    """For each old element an edit removes: where an enrollment waiting at it goes.
    Its old `next` (a removed branch: its old `else`), on through removed elements the
    same way, to a kept element's key or END. A key kept whose kind changed (an email
    step made a branch, or the reverse) maps to itself: its enrollments arrive at the
    new element. Old graphs are acyclic (checked at save); a walk that meets a key
    twice ends (END) rather than loop."""
    kept = {element.key: element for element in new}
    by_key = {element.key: element for element in old}
    moves = {}
    for element in old:
        if element.key in kept:
            if kept[element.key].is_branch != element.is_branch:
                moves[element.key] = element.key
            continue
        seen, target = {element.key}, element.key
        while target != END and target not in kept:
            current = by_key.get(target)
            if current is None:
                target = END
                break
            target = current.branch["else"] if current.branch is not None else current.next
            if target in seen:
                target = END
                break
            seen.add(target)
        moves[element.key] = target
    return moves


def first_key(elements: Sequence[Element]) -> str | None:
    return elements[0].key if elements else None
