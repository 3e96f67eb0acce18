"""The confirmation tokens of the MCP server (outreach_mcp.confirmation): bound to the
exact action, target, set of ids and content; single-use; expiring; and the gate every
tool that sends email goes through. Also the preview's send plan from sending_status."""

from datetime import UTC, datetime

import pytest
from outreach_mcp.confirmation import (
    Binding,
    Confirmations,
    InvalidToken,
    confirmation_gate,
    idempotency_key,
)
from outreach_mcp.preview import first_send_at, mailbox_free_at, send_plan
from outreach_sdk import models

TWO = Binding(action="dispatch_campaign", target="c1", ids=["a", "b"])


class Clock:
    def __init__(self, now: float = 1_000_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_token_confirms_its_binding_once():
    confirmations = Confirmations("s3cret")
    token = confirmations.issue(TWO).token
    assert confirmations.matches(token, TWO)
    confirmations.redeem(token, Binding(action="dispatch_campaign", target="c1", ids=["b", "a"]))
    with pytest.raises(InvalidToken, match="used already"):
        confirmations.redeem(token, TWO)


@pytest.mark.parametrize(
    "other",
    [
        Binding(action="dispatch_campaign", target="c1", ids=["c", "d"]),  # same count
        Binding(action="dispatch_campaign", target="c1", ids=["a"]),
        Binding(action="dispatch_campaign", target="c2", ids=["a", "b"]),
        Binding(action="start_outreach", target="c1", ids=["a", "b"]),
        Binding(action="dispatch_campaign", target="c1", ids=["a", "b"], extra={"x": 1}),
    ],
)
def test_a_token_confirms_nothing_else(other):
    confirmations = Confirmations("s3cret")
    token = confirmations.issue(TWO).token
    assert not confirmations.matches(token, other)
    with pytest.raises(InvalidToken, match="issued for something else"):
        confirmations.redeem(token, other)
    confirmations.redeem(token, TWO)  # still good for what it was issued for


def test_a_token_of_another_secret_or_edited_is_refused():
    token = Confirmations("s3cret").issue(TWO).token
    with pytest.raises(InvalidToken, match="not one this server issued"):
        Confirmations("other").matches(token, TWO)
    body, signature = token.split(".")
    with pytest.raises(InvalidToken, match="not one this server issued"):
        Confirmations("s3cret").matches(f"{body[:-2]}AA.{signature}", TWO)
    with pytest.raises(InvalidToken):
        Confirmations("s3cret").matches("garbage", TWO)


def test_an_expired_token_is_refused():
    clock = Clock()
    confirmations = Confirmations("s3cret", ttl=600, clock=clock)
    token = confirmations.issue(TWO).token
    clock.now += 601
    with pytest.raises(InvalidToken, match="expired"):
        confirmations.redeem(token, TWO)


def test_the_gate_previews_then_lets_exactly_the_confirmed_binding_through():
    confirmations = Confirmations("s3cret")
    preview = {"contacts": 2}
    first = confirmation_gate(confirmations, TWO, token=None, preview=preview)
    assert first["status"] == "confirmation_required" and first["preview"] == preview
    other = Binding(action="dispatch_campaign", target="c1", ids=["c", "d"])
    changed = confirmation_gate(
        confirmations, other, token=first["confirmation_token"], preview={"contacts": 2}
    )
    assert changed["status"] == "confirmation_required"
    assert changed["confirmation_token"] != first["confirmation_token"]
    assert "changed" in changed["message"]
    assert (
        confirmation_gate(confirmations, TWO, token=first["confirmation_token"], preview={}) is None
    )
    with pytest.raises(InvalidToken, match="used already"):
        confirmation_gate(confirmations, TWO, token=first["confirmation_token"], preview={})


def test_each_token_has_its_own_idempotency_key():
    confirmations = Confirmations("s3cret")
    one, two = confirmations.issue(TWO).token, confirmations.issue(TWO).token
    assert idempotency_key(one) != idempotency_key(two)
    assert idempotency_key(one) == idempotency_key(one)
    assert len(idempotency_key(one)) <= 255


WINDOW = {"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]}


@pytest.mark.parametrize(
    ("now", "delay", "window", "expected"),
    [
        # No window: now plus the delay.
        ("2026-11-24T20:00:00+00:00", 30, None, "2026-11-24T20:30:00+00:00"),
        # Tuesday 10:00 in Paris (09:00 UTC): inside the window.
        ("2026-11-24T09:00:00+00:00", 0, WINDOW, "2026-11-24T09:00:00+00:00"),
        # Tuesday 21:00 in Paris: Wednesday's opening, 09:00 Paris = 08:00 UTC.
        ("2026-11-24T20:00:00+00:00", 0, WINDOW, "2026-11-25T08:00:00+00:00"),
        # Friday evening: Monday's opening.
        ("2026-11-27T20:00:00+00:00", 0, WINDOW, "2026-11-30T08:00:00+00:00"),
    ],
)
def test_the_first_send_waits_for_the_send_window(now, delay, window, expected):
    at = first_send_at(
        datetime.fromisoformat(now),
        delay_minutes=delay,
        timezone="Europe/Paris",
        send_window=window,
    )
    assert at.astimezone(UTC) == datetime.fromisoformat(expected)


NOW = datetime(2026, 11, 24, 12, 0, tzinfo=UTC)


def _box(pk, reasons=(), earliest=None):
    return {
        "credential_id": pk,
        "from_email": f"{pk}@example.com",
        "can_send_now": not reasons,
        "reasons": list(reasons),
        "next_send_earliest_at": earliest,
    }


def test_a_mailbox_is_free_after_its_pace_and_daily_limit():
    assert mailbox_free_at(_box("m"), NOW) == NOW
    paced = _box("m", [{"code": "paced", "until": "2026-11-24T12:01:34Z"}], "2026-11-24T12:01:34Z")
    assert mailbox_free_at(paced, NOW) == datetime(2026, 11, 24, 12, 1, 34, tzinfo=UTC)
    assert mailbox_free_at(_box("m", [{"code": "mailbox_disabled", "until": None}]), NOW) is None


def test_the_send_plan_follows_the_planner_and_the_pace():
    campaign = models.Campaign(
        id="c", steps=[{"delay_minutes": 0}], timezone="UTC", send_window=None
    )
    status = models.SendingStatus(
        status="draft",
        mailboxes=[
            _box("m", [{"code": "paced", "until": "2026-11-24T12:01:34Z"}], "2026-11-24T12:01:34Z")
        ],
    )
    mailbox = models.Mailbox(id="m", min_interval_seconds=120, max_interval_seconds=300)
    plan = send_plan(campaign, status, [mailbox], 3, NOW)
    assert plan["first_send_at"] == "2026-11-24T12:01:34Z"
    # Two more after the first, 120 to 300 seconds apart.
    assert plan["last_first_send_between"] == ["2026-11-24T12:05:34Z", "2026-11-24T12:11:34Z"]
    blocked = models.SendingStatus(
        status="paused", mailboxes=[_box("m", [{"code": "campaign_paused", "until": None}])]
    )
    assert send_plan(campaign, blocked, [mailbox], 3, NOW)["blocked"] == ["campaign_paused"]
