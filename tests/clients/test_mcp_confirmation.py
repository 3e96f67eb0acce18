"""The dispatch confirmation token and the first send time of a preview."""

from datetime import UTC, datetime

import pytest
from outreach_mcp.confirmation import Confirmations, InvalidToken, selection_digest
from outreach_mcp.preview import first_send_at

CLAIMS = {"campaign_id": "c1", "selection": "all_pending", "contacts": 40, "mailboxes": ["m1"]}


def test_a_token_carries_the_previewed_numbers_back():
    confirmations = Confirmations("s3cret")
    token, expires = confirmations.issue(CLAIMS)
    assert confirmations.check(token) == {**CLAIMS, "exp": expires}
    # Another process with the same secret accepts it: nothing is stored.
    assert Confirmations("s3cret").check(token)["contacts"] == 40


def test_a_token_of_another_secret_or_edited_is_refused():
    token, _ = Confirmations("s3cret").issue(CLAIMS)
    with pytest.raises(InvalidToken, match="not one this server issued"):
        Confirmations("other").check(token)
    signature = token.split(".")[1]
    edited = Confirmations("s3cret").issue({**CLAIMS, "contacts": 4})[0].split(".")[0]
    with pytest.raises(InvalidToken, match="not one this server issued"):
        Confirmations("s3cret").check(f"{edited}.{signature}")
    with pytest.raises(InvalidToken):
        Confirmations("s3cret").check("garbage")


def test_an_expired_token_is_refused():
    confirmations = Confirmations("s3cret", ttl=-1)
    token, _ = confirmations.issue(CLAIMS)
    with pytest.raises(InvalidToken, match="expired"):
        confirmations.check(token)


def test_the_selection_digest_ignores_order_and_tells_sets_apart():
    assert selection_digest(["b", "a"]) == selection_digest(["a", "b"])
    assert selection_digest(["a"]) != selection_digest(["a", "b"])
    assert selection_digest(None) == "all_pending"


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
