"""Label not_now: a person who answers that the time is wrong, in every language the
intake reads; never a reply that refuses the offer, never a quoted phrase, never ahead
of the intake's other labels."""

import pytest

from outreach.conversations.labels import (
    AUTO_REPLY,
    NOT_INTERESTED_PHRASES,
    NOT_NOW,
    NOT_NOW_PHRASES,
    OUT_OF_OFFICE,
    UNSUBSCRIBE_REQUEST,
    message_classify,
)
from outreach.conversations.parse import ParsedMessage
from tests.conversations.test_labels import RECEIVED, cases, classify, classify_file

NOT_NOW_CASES = cases(NOT_NOW_PHRASES)


def _phrase(phrase: str) -> str:
    return phrase.replace("...", "im Herbst")


@pytest.mark.parametrize(("language", "phrase"), NOT_NOW_CASES)
def test_each_not_now_phrase_in_a_reply(language, phrase):
    body = f"Thanks for writing.\n{_phrase(phrase).capitalize()}.\nBest, Ada"
    assert classify(new_text=body).label == NOT_NOW


@pytest.mark.parametrize(("language", "phrase"), NOT_NOW_CASES)
def test_a_refusal_of_the_offer_is_not_not_now(language, phrase):
    refusals = NOT_INTERESTED_PHRASES[language]
    body = f"{refusals[0].capitalize()}, {_phrase(phrase)}."
    assert classify(new_text=body).label == ""


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("Not now, maybe next quarter.", NOT_NOW),
        ("Interesting, but reach out in a few months.", NOT_NOW),
        ("It's not a priority right now for our team.", NOT_NOW),
        ("Maybe next quarter? Budgets are frozen.", NOT_NOW),
        ("Im Moment nicht, vielleicht im nächsten Quartal.", NOT_NOW),
        ("Pas pour le moment, recontactez-moi dans quelques mois.", NOT_NOW),
        ("Ahora no es buen momento, escríbeme el próximo trimestre.", NOT_NOW),
        # An interested answer stays for a person to label.
        ("Yes, interested! Can we talk on Tuesday?", ""),
        ("Sounds great, send me the deck now.", ""),
        # A refusal, even with a time in it.
        ("Not interested right now, thanks.", ""),
        ("Kein Interesse, auch nicht im nächsten Quartal.", ""),
        ("No nos interesa por ahora.", ""),
        # Words inside others do not count.
        ("Nothing now-ish to report, let's meet.", ""),
    ],
)
def test_not_now_against_interested_and_not_interested(text, label):
    assert classify(new_text=text).label == label


def test_a_quoted_not_now_does_not_count():
    text = "Great, let's talk tomorrow.\n\nOn Mon, Sam wrote:\n> Is it not the right time?"
    parsed = ParsedMessage(subject="Re: Hi", new_text="Great, let's talk tomorrow.", text=text)
    assert message_classify(parsed, received_at=RECEIVED).label == ""


def test_the_intakes_other_labels_come_first():
    assert classify(new_text="Not now. Please remove me from your list.").label == (
        UNSUBSCRIBE_REQUEST
    )
    assert classify(new_text="Not right now.", auto_submitted=True).label == AUTO_REPLY
    assert classify(subject="Out of office", new_text="Not right now.").label == OUT_OF_OFFICE


def test_the_outlook_web_reply_of_the_corpus_is_not_now():
    assert classify_file("outlook_web_reply.eml").label == NOT_NOW
