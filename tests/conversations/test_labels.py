"""message_classify: the labels the intake sets, every phrase of the lists, return dates."""

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from outreach.conversations.labels import (
    AUTO_REPLY,
    AUTO_REPLY_SUBJECT_PHRASES,
    MONTHS,
    NOT_NOW,
    OUT_OF_OFFICE,
    OUT_OF_OFFICE_PHRASES,
    TICKET_PHRASES,
    UNSUBSCRIBE_PHRASES,
    UNSUBSCRIBE_REQUEST,
    UNSUBSCRIBE_WHOLE_REPLIES,
    Classification,
    message_classify,
    return_date,
)
from outreach.conversations.parse import ParsedMessage, message_parse

MAIL = Path(__file__).parent / "mail"
RECEIVED = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)


def classify_file(name: str) -> Classification:
    parsed = message_parse((MAIL / name).read_bytes(), max_chars=100_000)
    return message_classify(parsed, received_at=RECEIVED)


def classify(subject: str = "Re: Quick question", new_text: str = "", **kw) -> Classification:
    parsed = ParsedMessage(subject=subject, new_text=new_text, text=new_text, **kw)
    return message_classify(parsed, received_at=RECEIVED)


@pytest.mark.parametrize(
    ("name", "label", "returns_on"),
    [
        # RFC 3834 headers and Outlook's "Automatic reply:" with an out-of-office body.
        ("ooo_en_outlook.eml", OUT_OF_OFFICE, date(2026, 3, 16)),
        # No RFC 3834 header: the subject and body say it.
        ("ooo_de_noheaders.eml", OUT_OF_OFFICE, date(2026, 3, 16)),
        ("ooo_fr.eml", OUT_OF_OFFICE, date(2026, 3, 20)),
        ("ooo_es.eml", OUT_OF_OFFICE, date(2026, 3, 16)),
        ("ticket_ack.eml", AUTO_REPLY, None),
        ("unsubscribe_en.eml", UNSUBSCRIBE_REQUEST, None),
        ("unsubscribe_de.eml", UNSUBSCRIBE_REQUEST, None),
        ("unsubscribe_fr.eml", UNSUBSCRIBE_REQUEST, None),
        ("unsubscribe_es.eml", UNSUBSCRIBE_REQUEST, None),
        # "Unsubscribe" in the quoted footer of our own message is not a request.
        ("reply_quoted_unsubscribe_footer.eml", "", None),
        ("gmail_reply.eml", "", None),
        ("outlook_desktop_reply.eml", "", None),
        # "Not the right time for us, sorry. Maybe check back in the autumn."
        ("outlook_web_reply.eml", NOT_NOW, None),
        ("apple_mail_reply.eml", "", None),
        ("thunderbird_flowed.eml", "", None),
        ("japanese_iso2022jp.eml", "", None),
        ("html_only_reply.eml", "", None),
        ("german_outlook_reply.eml", "", None),
        ("french_outlook_reply.eml", "", None),
        ("spanish_outlook_reply.eml", "", None),
        ("garbage.eml", "", None),
        ("empty.eml", "", None),
    ],
)
def test_it_labels_the_corpus(name, label, returns_on):
    assert classify_file(name) == Classification(label, returns_on)


def test_the_quoted_footer_does_hold_the_word():
    parsed = message_parse(
        (MAIL / "reply_quoted_unsubscribe_footer.eml").read_bytes(), max_chars=10**5
    )
    assert "Unsubscribe: https://outreach-demo.example/u/Zk3q" in parsed.text


def cases(table: dict[str, list[str]]) -> list[tuple[str, str]]:
    """(language, phrase) for every phrase of a table."""
    return [(language, phrase) for language, phrases in table.items() for phrase in phrases]


OOO_CASES = cases(OUT_OF_OFFICE_PHRASES)


@pytest.mark.parametrize(("language", "phrase"), OOO_CASES)
def test_each_out_of_office_phrase_in_the_body_of_an_automatic_message(language, phrase):
    body = "Hello,\n" + phrase.replace("...", "morgen") + " und so weiter.\nRegards"
    assert classify(new_text=body, auto_submitted=True).label == OUT_OF_OFFICE


@pytest.mark.parametrize(("language", "phrase"), OOO_CASES)
def test_a_person_who_writes_an_out_of_office_phrase_has_replied(language, phrase):
    """No automatic marker, no phrase in the subject: a person wrote it."""
    body = "Sounds good.\n" + phrase.replace("...", "morgen") + " und so weiter.\nRegards"
    assert classify(new_text=body).label == ""


@pytest.mark.parametrize(("language", "phrase"), OOO_CASES)
def test_each_out_of_office_phrase_in_the_subject(language, phrase):
    subject = phrase.replace("...", "morgen").upper()
    assert classify(subject=subject, new_text="Thanks.").label == OUT_OF_OFFICE


def test_a_phrase_wrapped_over_two_lines_still_matches():
    assert classify(new_text="I am out of\nthe office.", auto_submitted=True).label == OUT_OF_OFFICE


def test_a_phrase_must_be_whole_words():
    assert classify(new_text="We are reabwesendly fine").label == ""
    assert classify(new_text="He stopped using it").label == ""


@pytest.mark.parametrize(
    "phrase", [p for phrases in AUTO_REPLY_SUBJECT_PHRASES.values() for p in phrases]
)
def test_each_auto_reply_subject(phrase):
    subject = f"{phrase.title()}: Quick question"
    assert classify(subject=subject, new_text="Thank you for your message.").label == AUTO_REPLY


@pytest.mark.parametrize("phrase", [p for phrases in TICKET_PHRASES.values() for p in phrases])
def test_each_ticket_acknowledgement_phrase(phrase):
    assert classify(new_text=f"Hello,\n\n{phrase.capitalize()} today.").label == AUTO_REPLY


@pytest.mark.parametrize(
    "subject",
    [
        "[#48213] Re: Quick question",
        "Re: Quick question [Ticket #48213]",
        "(Case 00123456) Quick question",
        "Request #12345: Quick question",
        "Ticket#2025030310000012 Quick question",
    ],
)
def test_a_ticket_number_in_the_subject(subject):
    assert classify(subject=subject, new_text="We will get back to you.").label == AUTO_REPLY


def test_an_auto_submitted_message_without_an_ooo_phrase_is_an_auto_reply():
    assert classify(new_text="Thanks, noted.", auto_submitted=True).label == AUTO_REPLY


def test_out_of_office_comes_before_auto_reply():
    parsed = ParsedMessage(
        subject="Automatic reply: Quick question",
        new_text="I am on vacation until March 9.",
        auto_submitted=True,
    )
    assert message_classify(parsed, received_at=RECEIVED) == Classification(
        OUT_OF_OFFICE, date(2026, 3, 9)
    )


def test_an_automatic_reply_subject_without_ooo_body_is_an_auto_reply():
    assert classify(subject="Automatic reply: Quick question", new_text="Thanks!").label == (
        AUTO_REPLY
    )


UNSUBSCRIBE_CASES = cases(UNSUBSCRIBE_PHRASES)


@pytest.mark.parametrize(("language", "phrase"), UNSUBSCRIBE_CASES)
def test_each_unsubscribe_phrase_in_the_new_text(language, phrase):
    body = "Hi,\n" + phrase.replace("...", "bitte") + " – thanks.\nTom"
    assert classify(new_text=body).label == UNSUBSCRIBE_REQUEST


@pytest.mark.parametrize(("language", "phrase"), UNSUBSCRIBE_CASES)
def test_an_unsubscribe_phrase_only_in_the_quote_does_not_count(language, phrase):
    raw = (
        "Content-Type: text/plain; charset=utf-8\n\nSounds good.\n\n"
        "On Mon, 2 Mar 2026 at 09:55, Sam <sam@outreach-demo.example> wrote:\n"
        f"> Hi,\n> {phrase.replace('...', 'bitte')}\n"
    ).encode()
    parsed = message_parse(raw, max_chars=10_000)
    assert parsed.new_text == "Sounds good."
    assert message_classify(parsed, received_at=RECEIVED).label == ""


@pytest.mark.parametrize("reply", UNSUBSCRIBE_WHOLE_REPLIES)
def test_a_reply_that_is_only_the_word(reply):
    assert classify(new_text=reply.upper() + ".").label == UNSUBSCRIBE_REQUEST
    assert classify(subject=f"RE: AW: {reply}", new_text="").label == UNSUBSCRIBE_REQUEST


def test_the_word_inside_a_sentence_is_not_enough():
    assert classify(new_text="How do I unsubscribe from your newsletter? Anyway, yes.").label == ""
    assert classify(new_text="Stop by our booth at the fair.").label == ""


def test_a_month_name_means_one_month_in_every_language():
    seen: dict[str, int] = {}
    for names in MONTHS.values():
        for name, number in names.items():
            assert seen.setdefault(name, number) == number, name


# --- return dates -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("en", "I am away and back on Monday, March 3", date(2026, 3, 3)),
        ("en", "I am away and back on Monday, March 1", date(2027, 3, 1)),  # the next one
        ("en", "I am away and back on Monday, March 16", date(2026, 3, 16)),
        ("en", "out of office until 3/15", date(2026, 3, 15)),
        ("en", "out of office until 15/3", date(2026, 3, 15)),
        ("en", "out of office until 15.03.", date(2026, 3, 15)),
        ("en", "returning 15 March 2026", date(2026, 3, 15)),
        ("en", "until March 3rd", date(2026, 3, 3)),
        ("en", "until Feb 28th", date(2027, 2, 28)),  # year-less: the next one
        ("en", "until March 23rd, 2026", date(2026, 3, 23)),
        ("en", "back on the 21st of March", None),  # "21st of March" is not a documented form
        ("en", "back on 2026-03-20", date(2026, 3, 20)),
        ("en", "until Sept. 4", date(2026, 9, 4)),
        ("de", "bis zum 15.03.2026", date(2026, 3, 15)),
        ("de", "ab dem 3. März wieder", date(2026, 3, 3)),
        ("de", "ab dem 13. März wieder", date(2026, 3, 13)),
        ("de", "bis 15. März", date(2026, 3, 15)),
        ("de", "bis 15.3.26", date(2026, 3, 15)),
        ("de", "am 04.05. wieder im Büro", date(2026, 5, 4)),
        ("fr", "jusqu'au 15 mars", date(2026, 3, 15)),
        ("fr", "jusqu\u2019au 15 mars", date(2026, 3, 15)),
        ("fr", "de retour le 1 mars 2026", None),  # before the notice: ignored
        ("fr", "de retour le 3 mars 2026", date(2026, 3, 3)),
        ("fr", "de retour le 13 mars 2026", date(2026, 3, 13)),
        ("fr", "jusqu'au 15/03", date(2026, 3, 15)),
        ("fr", "jusqu'au 1er avril", date(2026, 4, 1)),
        ("es", "hasta el 15 de marzo", date(2026, 3, 15)),
        ("es", "de vuelta el 3 de marzo", date(2026, 3, 3)),
        ("es", "de vuelta el 13 de marzo de 2026", date(2026, 3, 13)),
        ("es", "hasta el 15/03/2026", date(2026, 3, 15)),
        ("es", "hasta el 04/05", date(2026, 5, 4)),
        ("en", "until 04/05", date(2026, 4, 5)),  # English: month first
        ("en", "version 3.5 is out, I am away", None),  # a numeric date needs a marker
        ("en", "away from March 10 until March 20, back March 23", date(2026, 3, 23)),
        ("en", "from 10 March to 20 March", date(2026, 3, 20)),  # no marker: the latest
        ("en", "until March 3, 2028", None),  # more than 365 days ahead
        ("en", "until February 30", None),
        ("en", "until February 29", None),  # next one in 2028: too far
        ("en", "nothing here", None),
        ("en", "until 10:30 today", None),
    ],
)
def test_return_dates(language, text, expected):
    assert return_date(text, language=language, received_at=RECEIVED) == expected


def test_a_leap_day_is_the_next_one():
    received = datetime(2027, 6, 1, tzinfo=UTC)
    assert return_date("until Feb 29", language="en", received_at=received) == date(2028, 2, 29)


def test_a_date_on_the_day_received_counts():
    assert return_date("back March 2", language="en", received_at=RECEIVED) == date(2026, 3, 2)


def test_a_bilingual_notice_reads_numeric_dates_in_the_language_of_its_first_phrase():
    parsed = ParsedMessage(
        subject="Abwesenheitsnotiz",
        new_text="Ich bin bis 04/05 nicht im Büro. I am out of office until 04/05.",
    )
    assert message_classify(parsed, received_at=RECEIVED).returns_on == date(2026, 5, 4)


def test_only_out_of_office_gives_a_return_date():
    assert classify(new_text="Please remove me, I am back March 16 anyway").returns_on is None


# --- the sender's date order, the notice's own date ----------------------------------------


def classify_on_its_date(name: str) -> Classification:
    parsed = message_parse((MAIL / name).read_bytes(), max_chars=100_000)
    assert parsed.date is not None
    return message_classify(parsed, received_at=parsed.date)


def test_a_uk_notice_reads_day_first():
    """Sent 4 January 2010 from UTC: "returning 05/01/2010" is 5 January; 1 May would
    have held the sequence four months too long."""
    assert classify_on_its_date("ooo_en_uk_numeric.eml") == Classification(
        OUT_OF_OFFICE, date(2010, 1, 5)
    )


def test_travelling_with_intermittent_access_is_out_of_office():
    """Exchange's "Automatic reply" from New York: 03/09 is 9 March (month first)."""
    assert classify_on_its_date("ooo_en_exchange_travelling.eml") == Classification(
        OUT_OF_OFFICE, date(2026, 3, 9)
    )


NOTICE_DAY = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "zone_hours", "expected"),
    [
        # Both readings within two months: the zone's order; unknown (UTC): the earlier.
        ("back 03/04", -5, date(2026, 3, 4)),
        ("back 03/04", 1, date(2026, 4, 3)),
        ("back 03/04", 5.5, date(2026, 4, 3)),
        ("back 03/04", 0, date(2026, 3, 4)),
        ("back 03/04", None, date(2026, 3, 4)),
        # One reading months away, the other close: the close one, whatever the zone.
        ("back 06/03", -5, date(2026, 3, 6)),
        ("back 06/03", 0, date(2026, 3, 6)),
        # One reading before the notice: the other one.
        ("back 01/04", 1, date(2026, 4, 1)),
        ("back 04/01/2026", -5, date(2026, 4, 1)),
        # A reading another date of the notice states.
        ("returning 06/04/2026, that is 6 April", 0, date(2026, 4, 6)),
    ],
)
def test_numeric_dates_read_in_the_senders_order(text, zone_hours, expected):
    zone = None if zone_hours is None else timedelta(hours=zone_hours)
    assert return_date(text, language="en", received_at=NOTICE_DAY, zone=zone) == expected


def test_german_french_spanish_italian_dutch_are_day_first_whatever_the_zone():
    west = timedelta(hours=-5)
    for language in ("de", "fr", "es", "it", "nl"):
        got = return_date("bis 03/04", language=language, received_at=NOTICE_DAY, zone=west)
        assert got == date(2026, 4, 3), language


@pytest.mark.parametrize(
    ("language", "text", "expected"),
    [
        ("it", "sono fuori ufficio fino al 15 marzo", date(2026, 3, 15)),
        ("it", "rientro il 16/03", date(2026, 3, 16)),
        ("it", "in ferie fino al 3 aprile 2026", date(2026, 4, 3)),
        ("nl", "afwezig tot en met 15 maart", date(2026, 3, 15)),
        ("nl", "met vakantie t/m 04-05", date(2026, 5, 4)),
        ("nl", "vanaf 9 mrt weer op kantoor", date(2026, 3, 9)),
    ],
)
def test_italian_and_dutch_return_dates(language, text, expected):
    assert return_date(text, language=language, received_at=RECEIVED) == expected


@pytest.mark.parametrize(
    ("subject", "body"),
    [
        ("Risposta automatica: Quick question", "Sono in trasferta fino al 10 marzo."),
        ("Automatisch antwoord: Quick question", "Ik ben op reis tot 10 maart."),
        ("Automatische Antwort: Quick question", "Ich bin auf Geschäftsreise bis 10.03."),
        ("Réponse automatique : Quick question", "Je suis en déplacement jusqu'au 10 mars."),
        ("Respuesta automática: Quick question", "Estoy de viaje hasta el 10 de marzo."),
        ("Automatic reply: Quick question", "I am on a business trip until March 10."),
    ],
)
def test_away_notices_in_six_languages(subject, body):
    assert classify(subject=subject, new_text=body) == Classification(
        OUT_OF_OFFICE, date(2026, 3, 10)
    )
