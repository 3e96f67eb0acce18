"""The confirmation tokens of the MCP server (outreach_mcp.confirmation): bound to the
exact action, target, set of ids and content; single-use; expiring; and the gate every
tool that sends email goes through."""

import pytest
from outreach_mcp.confirmation import (
    Binding,
    Confirmations,
    InvalidToken,
    confirmation_gate,
    idempotency_key,
)

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
