"""new_text on mail nobody here wrote (talon's fixtures, tests/conversations/fixtures/
NOTICE.md), on the forms of GitHub's email_reply_parser fixtures and on the attribution
and header-block forms of mail clients in many languages (written here)."""

import email
import email.iterators
import json
from pathlib import Path

import pytest

from outreach.conversations.parse import message_parse
from outreach.conversations.quotes import quote_cut

HERE = Path(__file__).parent
TALON = HERE / "fixtures" / "talon"
MAIL = HERE / "mail"


def same(got: str, expected: str) -> bool:
    """Equal line by line, trailing spaces and runs of blank lines read as one (talon's
    expectations come from its own tidying)."""

    def tidy(text: str) -> list[str]:
        out: list[str] = []
        for line in text.strip().split("\n"):
            line = line.rstrip()
            if line or (out and out[-1]):
                out.append(line)
        return out

    return tidy(got) == tidy(expected)


# --- talon ------------------------------------------------------------------------------

# new_text also drops the signature, which talon leaves to talon.signature: these two
# expectations lose theirs ("Sent from my iPhone"; "-- " and the lines under it).
SIGNATURE_DROPPED = {"iphone": "Hello", "sparrow": "Hello"}


def talon_standard() -> list[tuple[str, str, str]]:
    cases = []
    for path in sorted((TALON / "standard_replies").glob("*.eml")):
        message = email.message_from_bytes(path.read_bytes())
        part = next(email.iterators.typed_subpart_iterator(message, subtype="plain"))
        text = part.get_payload(decode=True).decode("utf-8")
        expected_file = path.with_name(path.stem + "_reply_text")
        expected = expected_file.read_text().strip() if expected_file.exists() else "Hello"
        cases.append((path.stem, text, SIGNATURE_DROPPED.get(path.stem, expected)))
    return cases


TALON_TEXT = json.loads((TALON / "text_quotations.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(("name", "text", "expected"), talon_standard())
def test_talon_standard_replies(name, text, expected):
    assert same(quote_cut(text)[0], expected), name


@pytest.mark.parametrize("case", TALON_TEXT, ids=[c["name"] for c in TALON_TEXT])
def test_talon_text_quotations(case):
    assert same(quote_cut(case["text"])[0], case["expected"])


def test_talon_standard_replies_through_the_parser():
    """The whole message, as the intake reads it (the HTML part of each is ignored:
    the plain text has its marker)."""
    for name, _text, expected in talon_standard():
        raw = (TALON / "standard_replies" / f"{name}.eml").read_bytes()
        assert same(message_parse(raw, max_chars=100_000).new_text, expected), name


# --- the forms of GitHub's email_reply_parser fixtures (written anew) ---------------------

GITHUB_FORMS = [
    # email_1_2: the answer below the quote, under an attribution (bottom-posting).
    (
        "bottom_post",
        "On Tue, Mar 3, 2025 at 9:12 AM, Lena Ortiz <lena@example.com> wrote:\n"
        "> Can the export run every night?\n>\n> Lena\n\n"
        "Yes, set the schedule under Settings and it runs at 02:00.\n\nTom",
        "Yes, set the schedule under Settings and it runs at 02:00.\n\nTom",
    ),
    # email_1_8: answers between quoted lines.
    (
        "inline_answers",
        "On 03/03/2025 09:12, Lena Ortiz wrote:\n> Does it run nightly?\nIt does.\n\n"
        "> And on weekends?\nOnly if you tick the box.\n\n-- \nTom Baker",
        "It does.\n\nOnly if you tick the box.",
    ),
    # email_2_1 / email_2_2: Outlook's line of underscores, the reply right above it.
    (
        "outlook_underscores",
        "Outlook answers above the line\n________________________________\n"
        "From: Ticket Desk [desk@example.com]\nSent: Monday, 3 March 2025 10:00 a.m.\n"
        "To: Tom\nSubject: Your ticket\n\nThe earlier message.",
        "Outlook answers above the line",
    ),
    # email_2_3: a header block followed by `>` lines.
    (
        "outlook_header_then_quote",
        "Answer above the headers\n\nFrom: Desk [desk@example.com]\n"
        "Sent: Monday, 3 March 2025 5:08 p.m.\nTo: Tom\nSubject: [case:7] Tom\n\n"
        "> A new comment was added.\n>\n> Thanks.",
        "Answer above the headers",
    ),
    # email_iPhone / email_sent_from_*: mobile signatures, one of them multi-word.
    ("sent_from_iphone", "Here is the file\n\nSent from my iPhone", "Here is the file"),
    (
        "sent_from_blackberry",
        "Here is the file\n\nSent from my Verizon Wireless BlackBerry",
        "Here is the file",
    ),
    (
        "sent_from_not_a_signature",
        "Here is the file\n\nSent from my desk, which is easier than my phone.",
        "Here is the file\n\nSent from my desk, which is easier than my phone.",
    ),
    # email_one_is_not_on / greedy_on: lines starting with "On" that are not attributions.
    (
        "on_is_not_an_attribution",
        "On your server you can run:\n\n    nc 127.0.0.1 4000\n\n"
        "On success it prints OK. On failure, check the tunnel.\n\n"
        "On 9 Jan 2025, at 2:47, Ray Chen wrote:\n\n> The tunnel stopped working.",
        "On your server you can run:\n\n    nc 127.0.0.1 4000\n\n"
        "On success it prints OK. On failure, check the tunnel.",
    ),
    # email_partial_quote_header: an attribution wrapped over two lines.
    (
        "attribution_wrapped",
        "Try restarting it.\n\nOn Fri, Mar 7, 2025 at 4:55 PM, Ray Chen\n"
        "<ray@example.com> wrote:\n> It hangs.",
        "Try restarting it.",
    ),
    # email_headers_no_delimiter: a header block with no separator line above it.
    (
        "headers_no_delimiter",
        "And one more answer!\nFrom: Ray <ray@example.com>\nDate: Mon, 3 Mar 2025 09:00\n"
        "To: Tom <tom@example.com>\nSubject: Re: Access\nAn earlier answer",
        "And one more answer!",
    ),
    # email_sig_delimiter_in_middle_of_line: "--" inside a line is not a signature.
    (
        "dashes_mid_line",
        "Use the flag -- it skips the check -- and rerun.",
        "Use the flag -- it skips the check -- and rerun.",
    ),
    # correct_sig: the "-- " signature.
    ("signature", "Sounds good.\n-- \nTom Baker\nExample Ltd", "Sounds good."),
]


@pytest.mark.parametrize(
    ("name", "text", "expected"), GITHUB_FORMS, ids=[c[0] for c in GITHUB_FORMS]
)
def test_github_email_reply_parser_forms(name, text, expected):
    assert quote_cut(text)[0] == expected


# --- attribution and header-block forms per language ------------------------------------

REPLY = "Gerne, Dienstag passt."
QUOTE = "\n\n> Hallo, passt Ihnen Dienstag?\n> Sam"
EARLIER = "\n\nHallo, passt Ihnen Dienstag?\nSam"

# (language, client form): the lines between the reply and the earlier message.
LANGUAGE_FORMS = [
    ("en", "gmail", "On Mon, Mar 3, 2025 at 10:00 AM Sam Carter <sam@example.com> wrote:", QUOTE),
    ("en", "gmail date first", "2016-03-03 17:21 GMT+01:00 Sam Carter <sam@example.com>:", QUOTE),
    (
        "en",
        "gmail date first wrapped",
        "2016-03-03 17:21 GMT+01:00 Sam Carter <\nsam@example.com>:",
        QUOTE,
    ),
    (
        "en",
        "zoho",
        "---- On Mon, 03 Mar 2025 10:00:00 +0100 Sam Carter <sam@example.com> wrote ----",
        QUOTE,
    ),
    (
        "en",
        "zoho, unquoted",
        "---- On Mon, 03 Mar 2025 10:00:00 +0100 Sam Carter <sam@example.com> wrote ----",
        EARLIER,
    ),
    (
        "en",
        "thunderbird bold",
        "*-------- Original Message --------*\n*Subject:* Demo\n*Date:* 3/3/2025",
        EARLIER,
    ),
    (
        "en",
        "outlook",
        "From: Sam Carter <sam@example.com>\nSent: Monday, March 3, 2025 10:00 AM\nTo: Anna\nSubject: Demo",
        EARLIER,
    ),
    (
        "de",
        "gmail",
        "Am Mo., 3. März 2025 um 10:00 Uhr schrieb Sam Carter <sam@example.com>:",
        QUOTE,
    ),
    (
        "de",
        "outlook",
        "Von: Sam Carter <sam@example.com>\nGesendet: Montag, 3. März 2025 10:00\nAn: Anna\nBetreff: Demo",
        EARLIER,
    ),
    ("fr", "gmail", "Le lun. 3 mars 2025 à 10:00, Sam Carter <sam@example.com> a écrit :", QUOTE),
    (
        "fr",
        "outlook",
        "De : Sam Carter <sam@example.com>\nEnvoyé : lundi 3 mars 2025 10:00\nÀ : Anna\nObjet : Demo",
        EARLIER,
    ),
    (
        "fr",
        "new outlook",
        "De : Sam Carter\nEnvoyé le : lundi 3 mars 2025 10:00\nÀ : Anna\nObjet : Demo",
        EARLIER,
    ),
    (
        "es",
        "gmail",
        "El lun, 3 mar 2025 a las 10:00, Sam Carter (<sam@example.com>) escribió:",
        QUOTE,
    ),
    (
        "es",
        "outlook",
        "De: Sam Carter\nEnviado el: lunes, 3 de marzo de 2025 10:00\nPara: Anna\nAsunto: Demo",
        EARLIER,
    ),
    (
        "it",
        "gmail",
        "Il giorno lun 3 mar 2025 alle ore 10:00 Sam Carter <sam@example.com> ha scritto:",
        QUOTE,
    ),
    (
        "it",
        "gmail wrapped",
        "Il giorno lun 3 mar 2025 alle ore 10:00 Sam Carter <\nsam@example.com> ha scritto:",
        QUOTE,
    ),
    (
        "it",
        "outlook",
        "Da: Sam Carter <sam@example.com>\nInviato: lunedì 3 marzo 2025 10:00\nA: Anna\nOggetto: Demo",
        EARLIER,
    ),
    ("nl", "gmail", "Op ma 3 mrt 2025 om 10:00 schreef Sam Carter <sam@example.com>:", QUOTE),
    (
        "nl",
        "gmail wrapped",
        "Op ma 3 mrt 2025 om 10:00 schreef Sam Carter <\nsam@example.com>:",
        QUOTE,
    ),
    (
        "nl",
        "apple mail",
        "Op 3 mrt. 2025, om 10:00 heeft Sam Carter <sam@example.com> het volgende\ngeschreven:",
        QUOTE,
    ),
    (
        "nl",
        "outlook",
        "Van: Sam Carter <sam@example.com>\nVerzonden: maandag 3 maart 2025 10:00\nAan: Anna\nOnderwerp: Demo",
        EARLIER,
    ),
    ("sv", "gmail", "Den mån 3 mars 2025 kl 10:00 skrev Sam Carter <sam@example.com>:", QUOTE),
    (
        "sv",
        "outlook",
        "Från: Sam Carter <sam@example.com>\nSkickat: den 3 mars 2025 10:00\nTill: Anna\nÄmne: Demo",
        EARLIER,
    ),
    ("no", "gmail", "man. 3. mar. 2025 kl. 10:00 skrev Sam Carter <sam@example.com>:", QUOTE),
    ("no", "apple mail", "Den 3. mar. 2025 kl. 10:00 skrev Sam Carter <sam@example.com>:", QUOTE),
    (
        "da",
        "outlook",
        "Fra: Sam Carter <sam@example.com>\nSendt: 3. marts 2025 10:00\nTil: Anna\nEmne: Demo",
        EARLIER,
    ),
    ("fi", "gmail", "ma 3. maalisk. 2025 klo 10.00 Sam Carter (sam@example.com) kirjoitti:", QUOTE),
    (
        "fi",
        "outlook",
        "Lähettäjä: Sam Carter <sam@example.com>\nLähetetty: maanantai 3. maaliskuuta 2025 10.00\nVastaanottaja: Anna\nAihe: Demo",
        EARLIER,
    ),
    (
        "pt",
        "gmail",
        "Em seg., 3 de mar. de 2025 às 10:00, Sam Carter <sam@example.com> escreveu:",
        QUOTE,
    ),
    (
        "pt",
        "outlook",
        "De: Sam Carter <sam@example.com>\nEnviado: segunda-feira, 3 de março de 2025 10:00\nPara: Anna\nAssunto: Demo",
        EARLIER,
    ),
    ("pl", "gmail", "pon., 3 mar 2025 o 10:00 Sam Carter <sam@example.com> napisał(a):", QUOTE),
    ("pl", "thunderbird", "W dniu 3.03.2025 o 10:00, Sam Carter pisze:\n", QUOTE),
    (
        "pl",
        "outlook",
        "Od: Sam Carter <sam@example.com>\nWysłano: poniedziałek, 3 marca 2025 10:00\nDo: Anna\nTemat: Demo",
        EARLIER,
    ),
    ("ru", "gmail", "пн, 3 мар. 2025 г. в 10:00, Sam Carter <sam@example.com>:", QUOTE),
    (
        "ru",
        "mail.ru",
        "Понедельник, 3 марта 2025, 10:00 +03:00 от Sam Carter <sam@example.com>:",
        QUOTE,
    ),
    (
        "ru",
        "android wrapped",
        '03.03.2025 10:00 пользователь "Sam Carter" <\nsam@example.com> написал:',
        QUOTE,
    ),
    (
        "ru",
        "outlook",
        "От: Sam Carter <sam@example.com>\nОтправлено: 3 марта 2025 г. 10:00\nКому: Anna\nТема: Demo",
        EARLIER,
    ),
    ("ja", "gmail", "2025年3月3日(月) 10:00 Sam Carter <sam@example.com>:", QUOTE),
    ("ja", "thunderbird", "On 2025/03/03 10:00, Sam Carter wrote:", QUOTE),
    (
        "ja",
        "outlook",
        "差出人: Sam Carter <sam@example.com>\n送信日時: 2025年3月3日 10:00\n宛先: Anna\n件名: Demo",
        EARLIER,
    ),
    ("zh", "gmail", "Sam Carter <sam@example.com> 于2025年3月3日周一 10:00写道：", QUOTE),
    (
        "zh",
        "gmail traditional",
        "Sam Carter <sam@example.com> 於 2025年3月3日 週一 上午10:00寫道：",
        QUOTE,
    ),
    (
        "zh",
        "outlook",
        "发件人: Sam Carter <sam@example.com>\n发送时间: 2025年3月3日 10:00\n收件人: Anna\n主题: Demo",
        EARLIER,
    ),
    (
        "zh",
        "outlook traditional",
        "寄件者: Sam Carter <sam@example.com>\n寄件日期: 2025年3月3日 上午 10:00\n收件者: Anna\n主旨: Demo",
        EARLIER,
    ),
    ("cs", "gmail", "po 3. 3. 2025 v 10:00 odesílatel Sam Carter <sam@example.com> napsal:", QUOTE),
    (
        "tr",
        "gmail",
        "Sam Carter <sam@example.com>, 3 Mar 2025 Pzt, 10:00 tarihinde şunu yazdı:",
        QUOTE,
    ),
    (
        "ko",
        "gmail",
        "2025년 3월 3일 (월) 오전 10:00, Sam Carter <sam@example.com>님이 작성:",
        QUOTE,
    ),
]


@pytest.mark.parametrize(
    ("language", "client", "marker", "rest"),
    LANGUAGE_FORMS,
    ids=[f"{c[0]}-{c[1]}" for c in LANGUAGE_FORMS],
)
def test_each_language_form_is_cut(language, client, marker, rest):
    text = f"{REPLY}\n\n{marker}{rest}"
    assert quote_cut(text) == (REPLY, True)


def test_the_forms_cover_at_least_twelve_languages():
    assert len({language for language, *_ in LANGUAGE_FORMS}) >= 12


MOBILE_SIGNATURES = [
    "Sent from my iPhone",
    "Sent from my Verizon Wireless BlackBerry",
    "Sent from Outlook Mobile",
    "Sent from Outlook for Android",
    "Get Outlook for iOS",
    "Sent from Yahoo Mail for iPhone",
    "Von meinem iPhone gesendet",
    "Gesendet von meinem iPad",
    "Envoyé de mon iPhone",
    "Envoyé depuis mon iPhone",
    "Enviado desde mi iPhone",
    "Enviado do meu iPhone",
    "Inviato da iPhone",
    "Verzonden vanaf mijn iPhone",
    "Skickat från min iPhone",
    "Sendt fra min iPad",
    "Lähetetty iPhonesta",
    "Wysłane z mojego iPhone'a",
    "Отправлено с iPhone",
    "iPhoneから送信",
    "发自我的iPhone",
]


@pytest.mark.parametrize("signature", MOBILE_SIGNATURES)
def test_each_mobile_signature_is_cut(signature):
    assert quote_cut(f"{REPLY}\n\n{signature}")[0] == REPLY


# --- the person's words are never lost ------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # Thunderbird's bottom-posting: the answer under the quote.
        (
            "On 03/03/2025 10:00, Sam Carter wrote:\n> Does Tuesday suit you?\n\nYes, at 3 pm.",
            "Yes, at 3 pm.",
        ),
        # Answered below a German attribution, with a signature under the answer.
        (
            "Am 03.03.2025 um 10:00 schrieb Sam Carter:\n> Passt Dienstag?\n\nJa.\n\n-- \nKlaus",
            "Ja.",
        ),
        # Written under the attribution without quoting: nothing above it but a
        # greeting, so the text without quoted lines is kept.
        (
            "Hi Sam,\n\nOn Mon, Mar 3, 2025 at 10:00 AM Sam <sam@example.com> wrote:\n"
            "Tuesday works, see you then.",
            "Hi Sam,\n\nOn Mon, Mar 3, 2025 at 10:00 AM Sam <sam@example.com> wrote:\n"
            "Tuesday works, see you then.",
        ),
        # A signature alone above everything: the words below are kept.
        ("-- \nAnna\n\nCan we talk tomorrow?", "--\nAnna\n\nCan we talk tomorrow?"),
        # A forwarded message is what the person sent.
        (
            "FYI\n\n---------- Forwarded message ---------\nFrom: Bob <bob@example.com>\n"
            "Date: Mon, Mar 3, 2025\n\nPlease remove me.",
            "FYI\n\n---------- Forwarded message ---------\nFrom: Bob <bob@example.com>\n"
            "Date: Mon, Mar 3, 2025\n\nPlease remove me.",
        ),
        # A greeting alone above a quote that the person did not answer in: kept as it is.
        ("Hi Sam,\n\n> Tuesday?\n> Sam", "Hi Sam,"),
    ],
)
def test_the_persons_words_are_kept(text, expected):
    assert quote_cut(text)[0] == expected


def every_text() -> list[tuple[str, str]]:
    texts = [(name, text) for name, text, _ in talon_standard()]
    texts += [(c["name"], c["text"]) for c in TALON_TEXT]
    texts += [(name, text) for name, text, _ in GITHUB_FORMS]
    texts += [(f"{c[0]}-{c[1]}", f"{REPLY}\n\n{c[2]}{c[3]}") for c in LANGUAGE_FORMS]
    for path in sorted(MAIL.glob("*.eml")):
        texts.append((path.name, message_parse(path.read_bytes(), max_chars=100_000).text))
    return texts


def own_words(text: str) -> bool:
    """Whether the text has a letter or digit outside its `>` lines."""
    return any(
        ch.isalnum()
        for line in text.split("\n")
        if not line.lstrip().startswith(">")
        for ch in line
    )


def test_new_text_is_never_empty_when_the_message_has_words_of_its_own():
    texts = every_text()
    assert len(texts) > 150
    for name, text in texts:
        if own_words(text):
            assert quote_cut(text)[0].strip(), name
