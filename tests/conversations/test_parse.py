"""message_parse on the corpus: what a person reading the reply sees."""

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest

from outreach.conversations.html import html_sanitize, html_to_text
from outreach.conversations.parse import Attachment, message_parse, unflow
from outreach.conversations.quotes import quote_cut

MAIL = Path(__file__).parent / "mail"
ORIGINAL_ID = "20260302085501.3f2a9c@outreach-demo.example"


def parse(name: str, max_chars: int = 100_000):
    return message_parse((MAIL / name).read_bytes(), max_chars=max_chars)


# --- new_text per client ----------------------------------------------------------------

NEW_TEXT = {
    "gmail_reply.eml": (
        "Hi Sam,\n\nThanks for reaching out \u2013 yes, we're looking at this right now.\n"
        "Could you send me a short deck before Thursday?\n\nBest,\nAnna"
    ),
    "outlook_desktop_reply.eml": (
        "Hi Sam,\n\nThat\u2019s interesting \u2013 we\u2019re reviewing vendors in Q2. "
        "Let\u2019s talk on Thursday at 3 pm.\n\nRegards,\nBob Miller\n"
        "Procurement Lead | Contoso Ltd."
    ),
    "outlook_web_reply.eml": (
        "Hello Sam,\n\nNot the right time for us, sorry. Maybe check back in the autumn.\n\n"
        "Kind regards,\nPriya"
    ),
    "apple_mail_reply.eml": (
        "Hi Sam,\n\nHappy to chat. Does Wednesday at 2 pm work? I\u2019ll bring our CTO.\n\n"
        "Cheers,\nMarie"
    ),
    "thunderbird_flowed.eml": (
        "Hi Sam,\n\nthanks for the note. We already use a tool for this and are quite happy "
        "with it, but I would be curious to see how yours compares on price and on the "
        "reporting side.\n\nSend me a one-pager and I will pass it on."
    ),
    "japanese_iso2022jp.eml": (
        "サム様\n\nご連絡ありがとうございます。\n来週の火曜日にお話しできれば幸いです。\n\n山田"
    ),
    "german_outlook_reply.eml": (
        "Hallo Herr Carter,\n\nvielen Dank für Ihre Nachricht. Das Thema ist für uns gerade "
        "interessant - lassen Sie uns nächste Woche sprechen.\n\nMit freundlichen Grüßen\n"
        "Klaus Wagner"
    ),
    "german_apple_reply.eml": "Passt, schicken Sie mir gern zwei Terminvorschläge.",
    "french_gmail_reply.eml": (
        "Bonjour Sam,\n\nMerci pour votre message. Pouvez-vous m'envoyer une proposition "
        "tarifaire ?\n\nCordialement,\nCamille"
    ),
    "french_outlook_reply.eml": (
        "Bonjour,\n\nNous ne sommes pas intéressés pour le moment.\n\nBien à vous,\nHugo Martin"
    ),
    "spanish_gmail_reply.eml": (
        "Hola Sam,\n\nGracias por escribir. ¿Podemos hablar el jueves?\n\nSaludos,\nLucía"
    ),
    "spanish_outlook_reply.eml": (
        "Buenos días,\n\nAhora mismo no nos interesa, gracias.\n\nUn saludo,\nJavier Ruiz"
    ),
    "base64_utf8.eml": (
        "Hallo Sam,\n\ngerne nächste Woche – Dienstag passt. Ich freue mich 🙂\n\n"
        "Grüße aus Köln\nJürgen"
    ),
}


@pytest.mark.parametrize("name", sorted(NEW_TEXT))
def test_it_keeps_only_the_new_part_of_a_reply(name):
    parsed = parse(name)
    assert parsed.new_text == NEW_TEXT[name]
    assert parsed.defects == []
    assert not parsed.truncated


def test_it_keeps_the_whole_gmail_text_with_its_quote_and_signature():
    parsed = parse("gmail_reply.eml")
    assert parsed.text.startswith("Hi Sam,\n\nThanks for reaching out \u2013 yes")
    assert "\n-- \nAnna Schmidt\nHead of Operations, Acme\n" in parsed.text
    # The attribution Gmail wrapped over two lines, then the quote.
    assert "On Mon, 2 Mar 2026 at 09:55, Sam Carter from Outreach Demo <\n" in parsed.text
    assert "> I noticed Acme is growing its onboarding team." in parsed.text


def test_it_reads_the_headers_of_a_gmail_reply():
    parsed = parse("gmail_reply.eml")
    assert parsed.from_email == "anna.schmidt@gmail.com"
    assert parsed.from_name == "Anna Schmidt"
    assert parsed.to == ["sam@outreach-demo.example"]
    assert parsed.cc == []
    assert parsed.subject == "Re: Quick question about Acme's onboarding"
    assert parsed.message_id == "CAF3xk2E9mJd8qWfN+0Lr5=pQx7kY4vB0sTQ@mail.gmail.com"
    assert parsed.in_reply_to == ORIGINAL_ID
    assert parsed.references == [ORIGINAL_ID]
    assert parsed.date == datetime(2026, 3, 2, 9, 14, 3, tzinfo=UTC)
    assert parsed.date.utcoffset() == timedelta(hours=1)
    assert parsed.auto_submitted is False
    assert parsed.attachments == []


def test_it_sanitizes_the_gmail_html_and_keeps_links():
    html = parse("gmail_reply.eml").html
    assert "<div>Hi Sam,</div>" in html
    assert (
        '<a href="https://outreach-demo.example/u/Zk3q" rel="noopener noreferrer nofollow">'
        "Unsubscribe</a>"
    ) in html
    assert "<img" not in html  # the quoted tracking pixel
    assert "style=" not in html
    assert "class=" not in html


def test_it_reads_outlook_desktop_windows_1252_and_lists_the_signature_logo():
    parsed = parse("outlook_desktop_reply.eml")
    assert parsed.subject == "RE: Quick question about Contoso's procurement"
    assert "That\u2019s interesting \u2013 we\u2019re reviewing" in parsed.text
    assert "Sent: Monday, March 2, 2026 9:55 AM" in parsed.text
    assert parsed.attachments == [Attachment("image001.png", "image/png", 70)]
    # Word's style sheet, conditional comments and the cid: image are gone.
    assert "<style" not in parsed.html
    assert "MsoNormal" not in parsed.html
    assert "font-family" not in parsed.html
    assert "<img" not in parsed.html
    assert "<b>From:</b> Sam Carter &lt;sam@outreach-demo.example&gt;" in parsed.html


def test_outlook_on_the_web_keeps_the_whole_conversation_in_text_and_html():
    parsed = parse("outlook_web_reply.eml")
    assert "________________________________\nFrom: Sam Carter" in parsed.text
    # The base64 HTML, sanitized: the quoted message stays, Outlook's ids and styles go.
    assert "Hi Priya,<br><br>I noticed Fabrikam" in parsed.html
    assert "divRplyFwdMsg" not in parsed.html and "Aptos" not in parsed.html


def test_the_html_gives_the_cut_when_the_plain_text_has_no_marker():
    raw = (MAIL / "outlook_web_reply.eml").read_bytes()
    # The same message with its plain part holding no marker: the HTML's divRplyFwdMsg cuts.
    raw = raw.replace(b"________________________________\r\n", b"")
    raw = raw.replace(b"From: Sam Carter <sam@outreach-demo.example>\r\nSent:", b"Sent:")
    parsed = message_parse(raw, max_chars=100_000)
    assert "Hi Priya" in parsed.text
    assert parsed.new_text == NEW_TEXT["outlook_web_reply.eml"]


def test_an_html_reply_written_below_the_quote_keeps_its_words():
    # HTML only, Outlook's mark of the earlier message (where its cut stops), and the
    # answer written below that message: the cut alone would leave only the greeting.
    html = (
        "<div>Hi Sam,</div>"
        '<div id="divRplyFwdMsg">Sam Carter, Monday: would a call next week work?</div>'
        "<div>Yes, Tuesday at 10 suits me. Bring the pricing sheet.</div>"
    )
    raw = (
        "From: Anna <anna@initech.example>\r\nTo: sam@outreach-demo.example\r\n"
        "Subject: Re: Intro\r\nMIME-Version: 1.0\r\n"
        "Content-Type: text/html; charset=utf-8\r\n\r\n" + html + "\r\n"
    ).encode()
    parsed = message_parse(raw, max_chars=100_000)
    assert "Yes, Tuesday at 10 suits me. Bring the pricing sheet." in parsed.new_text


def test_it_reads_apple_mail_with_its_cite_blockquote():
    parsed = parse("apple_mail_reply.eml")
    assert parsed.from_name == "Marie Dubois"
    assert "> On 2 Mar 2026, at 09:55, Sam Carter <sam@outreach-demo.example> wrote:" in (
        parsed.text
    )
    assert "<blockquote>" in parsed.html and 'type="cite"' not in parsed.html
    html_new, found = quote_cut(html_to_text(parsed.html))
    assert "> Hi Marie," in html_to_text(parsed.html)
    assert html_new == NEW_TEXT["apple_mail_reply.eml"] and found


def test_it_joins_format_flowed_lines_and_keeps_the_quote_depth():
    parsed = parse("thunderbird_flowed.eml")
    assert (
        "> I noticed Globex is growing its onboarding team. We help teams like yours cut "
        "onboarding time in half."
    ) in parsed.text
    assert "\n-- \nJonas Berg\nGlobex\n" in parsed.text


def test_unflow_follows_rfc_3676():
    assert unflow("one \r\ntwo\r\n", delsp=False) == "one two\n"
    assert unflow("one \r\ntwo", delsp=True) == "onetwo"
    assert unflow(" >stuffed \r\nline", delsp=False) == ">stuffed line"
    assert unflow("> a \r\n> b\r\n>> c", delsp=False) == "> a b\n>> c"
    assert unflow("text \r\n-- \r\nsig", delsp=False) == "text -- \nsig"  # a sig line is fixed
    assert unflow("a \r\n> b", delsp=False) == "a \n> b"  # no join across depths


def test_it_decodes_iso_2022_jp_subject_name_and_body():
    parsed = parse("japanese_iso2022jp.eml")
    assert parsed.subject == "Re: オンボーディングについて"
    assert parsed.from_name == "山田太郎"
    assert parsed.from_email == "taro.yamada@example.jp"
    assert "> オンボーディングについてご相談です。" in parsed.text
    assert parsed.date == datetime(2026, 3, 2, 9, 20, 31, tzinfo=UTC)


def test_it_renders_an_html_only_reply_as_text():
    parsed = parse("html_only_reply.eml")
    assert parsed.from_name == "Renée Fischer"
    assert parsed.text == (
        "Hi Sam,\n\nHere is what we need before a call:\n\n"
        "- pricing for 50 seats\n- a security questionnaire\n\n1. First\n2. Second\n\n"
        "Our requirements are on our site (https://initech.example/reqs).\n"
        "Call me: +49 30 123456\n\nThanks, Renée\n\nclick\n\n"
        "> On Mon, 2 Mar 2026, Sam Carter wrote:\n> Hi Renée, I noticed Initech is growing."
    )
    assert parsed.new_text.endswith("Thanks, Renée\n\nclick")


def test_it_sanitizes_hostile_html():
    html = parse("html_only_reply.eml").html
    for gone in (
        "<script",
        "document.cookie",
        "onload",
        "onclick",
        "<style",
        "url(",
        "tracker.example",
        "<img",
        "cid:",
        "<form",
        "<input",
        "password",
        "<button",
        "<iframe",
        "evil.example",
        "javascript:",
        "<title",
    ):
        assert gone not in html, gone
    assert (
        '<a href="https://initech.example/reqs" rel="noopener noreferrer nofollow">our site</a>'
    ) in html
    assert '<a href="tel:+4930123456" rel="noopener noreferrer nofollow">' in html
    assert "<ul><li>pricing for 50 seats</li>" in html


@pytest.mark.parametrize(
    ("dirty", "clean"),
    [
        ('<p onmouseover="x()">a</p>', "<p>a</p>"),
        ("<svg><script>alert(1)</script></svg>b", "b"),
        (
            '<a href="data:text/html;base64,PHNjcmlwdD4=">x</a>',
            '<a rel="noopener noreferrer nofollow">x</a>',
        ),
        ('<img src="data:image/png;base64,iVBOR">', ""),
        ('<div style="background:url(https://t.example/x.png)">c</div>', "<div>c</div>"),
        ("<object data='x.swf'></object><embed src='x.swf'>d", "d"),
        ("<math><mi>x</mi></math>e", "e"),
    ],
)
def test_html_sanitize_drops_active_and_remote_content(dirty, clean):
    assert html_sanitize(dirty) == clean


def test_it_decodes_base64_utf8_and_rfc2047_b_headers():
    parsed = parse("base64_utf8.eml")
    assert parsed.from_name == "Jürgen Köhler"
    assert parsed.subject == "Re: Kurze Frage zum Onboarding"


def test_it_decodes_rfc2047_headers_and_rfc2231_filenames():
    parsed = parse("rfc2047_attachments.eml")
    assert parsed.from_name == "Müller, Zoë"
    assert parsed.from_email == "zoe.mueller@example.org"
    assert parsed.to == ["sam@outreach-demo.example", "ventes@outreach-demo.example"]
    assert parsed.cc == ["joerg@example.org", "plain@example.org"]
    # Encoded words in Q and B, two charsets, folded over two lines.
    assert parsed.subject == "Re: Angebot für Größen und Märkte"
    assert parsed.references == ["older-1@outreach-demo.example", ORIGINAL_ID]
    assert parsed.text == "Anbei unser Angebot und die Präsentation."
    assert parsed.attachments == [
        Attachment("Angebot für Größen.pdf", "application/pdf", 45),
        Attachment(
            "Präsentation März.pptx",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            202,
        ),
        Attachment("Quick question.eml", "message/rfc822", 258),
    ]
    # The attached message's text is not the reply's.
    assert "original" not in parsed.text


@pytest.mark.parametrize(
    ("name", "text", "defects"),
    [
        ("unknown_charset.eml", "Très bien, à jeudi.", ["unknown charset x-unknown-charset"]),
        ("wrong_charset.eml", "Grüße – bis Donnerstag.", []),
        ("latin1_no_charset.eml", "Ça marche, à jeudi.", []),
        ("german_outlook_reply.eml", None, []),
    ],
)
def test_it_falls_back_sanely_on_missing_unknown_or_wrong_charsets(name, text, defects):
    parsed = parse(name)
    if text is not None:
        assert parsed.text == text
    assert "\ufffd" not in parsed.text
    assert parsed.defects == defects


def test_a_raw_8bit_header_is_read_as_utf8():
    assert parse("wrong_charset.eml").subject == "Re: Quick question über"


def test_a_declared_charset_the_bytes_do_not_fit_is_a_defect():
    raw = b"Content-Type: text/plain; charset=utf-8\n\nCa marche \xe0 jeudi\n"
    parsed = message_parse(raw, max_chars=1000)
    assert parsed.text == "Ca marche à jeudi"
    assert parsed.defects == ["not utf-8"]


def test_a_missing_closing_boundary_keeps_both_parts():
    parsed = parse("missing_close_boundary.eml")
    assert parsed.text == "Yes, Thursday works."
    assert parsed.html == "<p>Yes, <b>Thursday</b> works.</p>"
    assert parsed.defects == ["CloseBoundaryNotFound"]


def test_bad_base64_is_kept_with_its_defects():
    parsed = parse("bad_base64.eml")
    assert parsed.text.startswith("Yes, Thursday works.")
    assert "InvalidBase64Characters" in parsed.defects
    assert parsed.attachments[0].filename == "deck.pdf"


def test_a_message_cut_in_the_middle_of_an_attachment():
    parsed = parse("cut_mid_part.eml")
    assert parsed.text == "Here is the signed contract, see the attachment."
    assert parsed.attachments[0].filename == "contract.pdf"
    assert parsed.attachments[0].content_type == "application/pdf"
    assert "CloseBoundaryNotFound" in parsed.defects


def test_garbage_bytes_give_an_empty_reading_with_a_defect():
    parsed = parse("garbage.eml")
    assert parsed.from_email == "" and parsed.subject == "" and parsed.date is None
    assert parsed.defects


def test_a_header_only_message():
    parsed = parse("header_only.eml")
    assert parsed.from_email == "anna@example.com"
    assert parsed.from_name == "Anna"
    assert parsed.in_reply_to == ORIGINAL_ID
    assert parsed.text == parsed.new_text == parsed.html == ""
    assert parsed.date is None
    assert parsed.defects == ["unreadable date", "no text body"]


def test_empty_bytes():
    parsed = message_parse(b"", max_chars=1000)
    assert parsed.text == "" and parsed.from_email == ""
    assert parsed.defects == ["empty message"]


def test_a_date_without_a_zone_is_utc():
    raw = b"Date: Mon, 2 Mar 2026 10:00:00 -0000\n\nx\n"
    assert message_parse(raw, max_chars=10).date == datetime(2026, 3, 2, 10, tzinfo=UTC)
    raw = b"Date: Mon, 2 Mar 2026 10:00:00 +0530\n\nx\n"
    when = message_parse(raw, max_chars=10).date
    assert when is not None and when.tzinfo == timezone(timedelta(hours=5, minutes=30))


def test_text_and_html_are_cut_at_max_chars_and_marked():
    parsed = parse("gmail_reply.eml", max_chars=40)
    assert parsed.truncated
    assert parsed.text == "Hi Sam,\n\nThanks for reaching out \u2013 yes, "
    assert len(parsed.new_text) == 40
    assert 0 < len(parsed.html) <= 40
    assert parsed.html == html_sanitize(parsed.html)  # well-formed: sanitizing changes nothing


def test_max_chars_zero_keeps_nothing_but_headers():
    parsed = parse("gmail_reply.eml", max_chars=0)
    assert parsed.truncated and parsed.text == parsed.html == parsed.new_text == ""
    assert parsed.from_email == "anna.schmidt@gmail.com"


def test_an_html_body_within_bounds_is_not_marked():
    parsed = parse(
        "missing_close_boundary.eml", max_chars=len("<p>Yes, <b>Thursday</b> works.</p>")
    )
    assert not parsed.truncated


@pytest.mark.parametrize(
    ("headers", "auto"),
    [
        ("Auto-Submitted: auto-replied", True),
        ("Auto-Submitted: auto-generated; owner-email=x@y", True),
        ("Auto-Submitted: no", False),
        ("X-Autoreply: yes", True),
        ("X-Autorespond: Out of office", True),
        ("Precedence: bulk", True),
        ("Precedence: junk", True),
        ("Precedence: list", True),
        ("Precedence: auto_reply", True),
        ("Precedence: first-class", False),
        ("X-Auto-Response-Suppress: All", True),
        ("X-Auto-Response-Suppress: DR, OOF, AutoReply", True),
        ("X-Auto-Response-Suppress: DR, RN, NRN", False),
        ("X-Mailer: Outlook", False),
    ],
)
def test_auto_submitted_headers(headers, auto):
    raw = f"From: a@b.example\n{headers}\n\nbody\n".encode()
    assert message_parse(raw, max_chars=100).auto_submitted is auto


@pytest.mark.parametrize(
    ("text", "new_text"),
    [
        ("Sure.\n\n-----Original Message-----\nFrom: x", "Sure."),
        ("Ja.\n\n-----Ursprüngliche Nachricht-----\nVon: x", "Ja."),
        ("Oui.\n\n-----Message d'origine-----\nDe : x", "Oui."),
        ("Sí.\n\n-----Mensaje original-----\nDe: x", "Sí."),
        # A forwarded message is what the person sent; inside a quote it is quoted.
        (
            "Fine.\n\n---------- Forwarded message ---------\nFrom: x",
            "Fine.\n\n---------- Forwarded message ---------\nFrom: x",
        ),
        ("Fine.\n\n-----Original Message-----\n\n---------- Forwarded message ---------", "Fine."),
        ("Gern.\n\nVon: Sam <s@x>\nGesendet: Montag, 2. März 2026 09:55\nAn: k", "Gern."),
        ("Non.\n\nDe : Sam <s@x>\nEnvoyé : lundi 2 mars 2026 09:55\nÀ : h", "Non."),
        ("No.\n\nDe: Sam <s@x>\nEnviado el: lunes, 2 de marzo de 2026 9:55\nPara: j", "No."),
        ("Yes.\n\n*From:* Sam <s@x>\n*Date:* Mon, Mar 2, 2026\n*To:* a", "Yes."),
        ("Ok\n\nOn Mon, Mar 2, 2026 at 9:55 AM Sam <s@x> wrote:\n> hi", "Ok"),
        ("Ok\n\nOn 02/03/2026 09:55, Sam wrote:\n> hi", "Ok"),
        ("Ok\n\nAm Mo., 2. März 2026 um 09:55 Uhr schrieb Sam <\ns@x>:\n> hi", "Ok"),
        ("Ok\n\nLe lun. 2 mars 2026 à 09:55, Sam <s@x> a\nécrit :\n> hi", "Ok"),
        ("Ok\n\nLe 2 mars 2026 à 09:55, Sam <s@x> a écrit\u00a0:\n> hi", "Ok"),
        ("Ok\n\nEl lun, 2 mar 2026 a las 9:55, Sam (<s@x>)\nescribió:\n> hi", "Ok"),
        ("Ok\n\nIl giorno lun 2 mar 2026 alle ore 09:55 Sam <s@x> ha scritto:\n> hi", "Ok"),
        ("Thanks\n-- \nAnna\nCEO", "Thanks"),
        ("Thanks\n\nSent from my iPhone\n\n> On ..", "Thanks"),
        ("Danke\n\nVon meinem iPhone gesendet", "Danke"),
        ("Merci\n\nEnvoyé de mon iPhone", "Merci"),
        ("Gracias\n\nEnviado desde mi iPhone", "Gracias"),
        ("Get it\n\nGet Outlook for iOS\n___", "Get it"),
        ("> a question?\nMy answer.\n> another?\nAnother answer.", "My answer.\nAnother answer."),
        ("On my way to the office, I read this.", "On my way to the office, I read this."),
        ("From now on: yes.\nWe wrote: fine", "From now on: yes.\nWe wrote: fine"),
        ("Line\n____________________\nnot a header", "Line\n____________________\nnot a header"),
        ("On Monday we\nwrote: nothing", "On Monday we\nwrote: nothing"),
        ("", ""),
    ],
)
def test_quote_markers(text, new_text):
    assert quote_cut(text)[0] == new_text


def test_message_ids_without_brackets_and_several_in_reply_to():
    raw = (
        b"Message-ID: bare-id@x\nIn-Reply-To: <one@x> <two@x>\nReferences: <a@x>\n\tb@x <c@x>\n\nz"
    )
    parsed = message_parse(raw, max_chars=10)
    assert parsed.message_id == "bare-id@x"
    assert parsed.in_reply_to == "one@x"
    assert parsed.references == ["a@x", "c@x"]


def test_an_unknown_charset_in_an_encoded_word_falls_back():
    raw = b"Subject: =?x-nonsense?Q?Caf=C3=A9?= ok\n\nz"
    parsed = message_parse(raw, max_chars=10)
    assert parsed.subject == "Café ok"
    assert parsed.defects == ["unknown charset x-nonsense"]
