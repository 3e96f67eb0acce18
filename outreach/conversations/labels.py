"""The labels the intake sets on a reply, by documented rules (docs/conversations.md).

`message_classify(parsed, received_at=...)` tries, in this order:
1. out_of_office: an out-of-office phrase (`OUT_OF_OFFICE_PHRASES`) in the subject, or
   in the first `BODY_WINDOW` characters of the new text of a message that is automatic
   (the markers of rule 2: a person who writes "I'm on vacation until May 3" in a reply
   has replied). With it, the return date the notice gives (`return_date`), if any.
2. auto_reply: the message is auto-submitted (RFC 3834 `Auto-Submitted` other than `no`,
   `X-Autoreply`, `X-Autorespond`, `Precedence: auto_reply/bulk/junk/list`,
   `X-Auto-Response-Suppress: All/OOF`), or its subject says so
   (`AUTO_REPLY_SUBJECT_PHRASES`), or it is a ticket system's acknowledgement
   (`TICKET_PHRASES` in the subject or new text, or a ticket number in the subject).
3. unsubscribe_request: an unsubscribe phrase (`UNSUBSCRIBE_PHRASES`) in the new text
   only (a quoted footer never counts), or a new text or subject (its `Re:` prefixes
   removed) that is one of `UNSUBSCRIBE_WHOLE_REPLIES` and nothing else.
4. not_now: a "not now" phrase (`NOT_NOW_PHRASES`: "not right now", "maybe next
   quarter", "reach out in a few months", "not a priority right now", ...) in the new
   text only, and none of `NOT_INTERESTED_PHRASES` ("not interested", "kein Interesse",
   ...): a reply that refuses the offer is left for a person to label.
Otherwise "": an ordinary reply. (`interested`, `not_interested`, `meeting_booked`,
`wrong_person` and `other` are set by people and agents.)

Phrases are matched on lower-cased text with whitespace collapsed (so a phrase wrapped
over two lines still matches), typographic apostrophes as `'`, and whole words at both
ends; `...` in a phrase stands for up to 40 characters of anything.
"""

# Long: the phrase tables of four languages are data (each phrase tested); the rules
# themselves are short.

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta

from outreach.conversations.parse import ParsedMessage

OUT_OF_OFFICE = "out_of_office"
AUTO_REPLY = "auto_reply"
UNSUBSCRIBE_REQUEST = "unsubscribe_request"
NOT_NOW = "not_now"

BODY_WINDOW = 2000  # an out-of-office notice says so at its top
RETURN_DATE_HORIZON = timedelta(days=365)

OUT_OF_OFFICE_PHRASES: dict[str, list[str]] = {
    "en": [
        "out of office",
        "out of the office",
        "away from the office",
        "i am away",
        "i'm away",
        "i am currently away",
        "i'm currently away",
        "i am on vacation",
        "i'm on vacation",
        "i am currently on vacation",
        "i am on holiday",
        "i'm on holiday",
        "i am on leave",
        "i'm on leave",
        "on annual leave",
        "on parental leave",
        "on maternity leave",
        "on paternity leave",
        "away until",
        "on vacation until",
        "on leave until",
        "limited access to email",
        "limited access to my email",
        "limited access to e-mail",
        "limited email access",
        "intermittent access",
        "with limited access",
        "no access to email",
        "without access to email",
        "i am travelling",
        "i'm travelling",
        "i am traveling",
        "i'm traveling",
        "currently travelling",
        "currently traveling",
        "on a business trip",
        "on business travel",
        "away on business",
        "on sick leave",
        "on medical leave",
    ],
    "de": [
        "abwesenheitsnotiz",
        "nicht im büro",
        "nicht im hause",
        "außer haus",
        "ausser haus",
        "abwesend",
        "im urlaub",
        "in elternzeit",
        "bin ab ... wieder",
        "bin ... wieder im büro",
        "bin ... wieder erreichbar",
        "auf reisen",
        "auf geschäftsreise",
        "auf dienstreise",
        "eingeschränkt erreichbar",
        "eingeschränktem zugriff",
        "keinen zugriff auf meine e-mails",
        "im krankenstand",
        "im mutterschutz",
    ],
    "fr": [
        "absent du bureau",
        "absente du bureau",
        "hors du bureau",
        "en congés",
        "en congé",
        "en vacances",
        "je suis absent",
        "je suis absente",
        "actuellement absent",
        "actuellement absente",
        "message d'absence",
        "en déplacement",
        "en voyage",
        "accès limité",
        "accès restreint",
        "en arrêt maladie",
    ],
    "es": [
        "fuera de la oficina",
        "de vacaciones",
        "estoy ausente",
        "ausente de la oficina",
        "no estaré en la oficina",
        "no estoy en la oficina",
        "estaré fuera",
        "estoy fuera",
        "mensaje de ausencia",
        "de viaje",
        "en viaje de negocios",
        "acceso limitado",
        "de permiso",
    ],
    "it": [
        "fuori ufficio",
        "fuori sede",
        "sono assente",
        "assente dall'ufficio",
        "non sono in ufficio",
        "in ferie",
        "in vacanza",
        "in viaggio",
        "in trasferta",
        "in congedo",
        "in maternità",
        "in malattia",
        "accesso limitato",
        "messaggio di assenza",
    ],
    "nl": [
        "afwezig",
        "niet op kantoor",
        "niet aanwezig",
        "buiten kantoor",
        "met vakantie",
        "op vakantie",
        "op reis",
        "met verlof",
        "beperkt bereikbaar",
        "beperkte toegang",
        "afwezigheidsbericht",
    ],
}

AUTO_REPLY_SUBJECT_PHRASES: dict[str, list[str]] = {
    "en": [
        "automatic reply",
        "auto-reply",
        "auto reply",
        "autoreply",
        "automatic response",
        "auto-response",
        "auto response",
        "autoresponse",
        "automated response",
    ],
    "de": ["automatische antwort", "automatische rückantwort", "autoantwort"],
    "fr": ["réponse automatique", "reponse automatique"],
    "es": ["respuesta automática", "respuesta automatica"],
    "it": ["risposta automatica"],
    "nl": ["automatisch antwoord"],
}

TICKET_PHRASES: dict[str, list[str]] = {
    "en": [
        "your request has been received",
        "we have received your request",
        "we've received your request",
        "we have received your message",
        "we've received your message",
        "a support ticket has been created",
        "your ticket has been created",
        "a ticket has been opened",
        "this is an automated response",
        "this is an automatic response",
        "this is an automated message",
        "this is an automatic reply",
        "please do not reply to this email",
    ],
    "de": [
        "ihre anfrage ist bei uns eingegangen",
        "wir haben ihre anfrage erhalten",
        "wir haben ihre nachricht erhalten",
        "dies ist eine automatisch generierte",
        "dies ist eine automatische",
        "ihre ticketnummer",
    ],
    "fr": [
        "nous avons bien reçu votre",
        "votre demande a bien été reçue",
        "votre demande a été enregistrée",
        "ceci est un message automatique",
        "ceci est une réponse automatique",
        "votre numéro de ticket",
    ],
    "es": [
        "hemos recibido su",
        "hemos recibido tu",
        "su solicitud ha sido recibida",
        "este es un mensaje automático",
        "esta es una respuesta automática",
        "su número de ticket",
    ],
}
# A ticket number in the subject: "[#12345]", "[Ticket #12345]", "(Case 00123456)",
# "Request #12345", "Ticket#2025030310000012".
TICKET_SUBJECT = (
    r"[\[(]\s*(#|ticket|case|request|incident|anfrage|demande|solicitud|caso)[^\])]{0,20}\d{3,}"
    r"|\b(ticket|case|request|incident)\s?(#|no\.?|number|id:?)\s?\d{4,}"
)

UNSUBSCRIBE_PHRASES: dict[str, list[str]] = {
    "en": [
        "please remove me",
        "remove me from",
        "remove my email",
        "remove my address",
        "unsubscribe me",
        "please unsubscribe",
        "take me off",
        "stop emailing me",
        "stop sending me",
        "stop contacting me",
        "do not contact me",
        "don't contact me",
        "do not email me",
        "don't email me",
        "opt me out",
    ],
    "de": [
        "bitte entfernen sie mich",
        "entfernen sie mich",
        "nehmen sie mich ... aus",
        "abmelden",
        "austragen",
        "keine weiteren e-mails",
        "keine e-mails mehr",
        "schreiben sie mir nicht mehr",
        "kontaktieren sie mich nicht mehr",
        "löschen sie meine",
    ],
    "fr": [
        "désabonnez-moi",
        "desabonnez-moi",
        "désinscrivez-moi",
        "retirez-moi de votre liste",
        "retirez-moi",
        "supprimez-moi",
        "ne plus recevoir",
        "ne m'envoyez plus",
        "arrêtez de m'envoyer",
        "ne me contactez plus",
        "me désabonner",
        "me désinscrire",
    ],
    "es": [
        "darme de baja",
        "dame de baja",
        "denme de baja",
        "elimíname de su lista",
        "elimíname de tu lista",
        "elimínenme",
        "no me envíen más",
        "no me envíes más",
        "no me escriban más",
        "no me contacten",
        "quitarme de su lista",
        "quítenme de",
        "sáquenme de",
    ],
}
# A reply (or a subject) that is only this word asks for it too.
UNSUBSCRIBE_WHOLE_REPLIES = [
    "unsubscribe",
    "remove",
    "remove me",
    "stop",
    "abmelden",
    "austragen",
    "désabonner",
    "désinscrire",
    "désinscription",
    "baja",
    "de baja",
]

# "Not now": a person who answers that the time is wrong, not the offer (rule 4).
NOT_NOW_PHRASES: dict[str, list[str]] = {
    "en": [
        "not now",
        "not right now",
        "not at the moment",
        "not at this time",
        "not a priority",
        "not a priority right now",
        "not the right time",
        "now is not a good time",
        "now isn't a good time",
        "the timing isn't right",
        "the timing is not right",
        "bad timing",
        "maybe next quarter",
        "maybe next year",
        "maybe later this year",
        "until next quarter",
        "until next year",
        "try again next quarter",
        "reach out in a few months",
        "reach out again in",
        "reach back out in",
        "check back in a few months",
        "circle back in",
        "get back to me in a few months",
        "follow up in a few months",
        "touch base in a few months",
        "revisit this in",
        "in a few months' time",
        "no budget this quarter",
        "no budget this year",
    ],
    "de": [
        "nicht jetzt",
        "im moment nicht",
        "momentan nicht",
        "derzeit nicht",
        "aktuell nicht",
        "zurzeit nicht",
        "zur zeit nicht",
        "nicht der richtige zeitpunkt",
        "keine priorität",
        "vielleicht später",
        "im nächsten quartal",
        "nächstes quartal",
        "in ein paar monaten",
        "in einigen monaten",
        "nächstes jahr wieder",
        "später im jahr",
        "melden sie sich ... wieder",
        "kommen sie ... wieder auf mich zu",
    ],
    "fr": [
        "pas maintenant",
        "pas pour le moment",
        "pas pour l'instant",
        "pas en ce moment",
        "pas le bon moment",
        "pas une priorité",
        "plus tard dans l'année",
        "le trimestre prochain",
        "au prochain trimestre",
        "dans quelques mois",
        "l'année prochaine",
        "recontactez-moi dans",
        "revenez vers moi dans",
    ],
    "es": [
        "ahora no",
        "no por ahora",
        "por ahora no",
        "no en este momento",
        "en este momento no",
        "no es el momento",
        "no es buen momento",
        "no es una prioridad",
        "el próximo trimestre",
        "el trimestre que viene",
        "dentro de unos meses",
        "en unos meses",
        "el año que viene",
        "vuelve a contactarme",
        "vuelva a contactarme",
    ],
    "it": [
        "non ora",
        "non adesso",
        "non in questo momento",
        "per ora no",
        "al momento no",
        "non è il momento",
        "non è una priorità",
        "il prossimo trimestre",
        "tra qualche mese",
        "fra qualche mese",
        "l'anno prossimo",
    ],
    "nl": [
        "niet nu",
        "op dit moment niet",
        "momenteel niet",
        "niet het juiste moment",
        "geen prioriteit",
        "volgend kwartaal",
        "over een paar maanden",
        "later dit jaar",
    ],
}
# A refusal of the offer itself: with one of these, a "not now" phrase does not make the
# reply `not_now` (it is left for a person to label, as `not_interested` always is).
NOT_INTERESTED_PHRASES: dict[str, list[str]] = {
    "en": [
        "not interested",
        "no interest",
        "not looking for",
        "we are not looking",
        "we're not looking",
        "no need for",
        "never contact",
    ],
    "de": ["kein interesse", "nicht interessiert", "kein bedarf"],
    "fr": [
        "pas intéressé",
        "pas intéressée",
        "pas intéressés",
        "pas intéressées",
        "aucun intérêt",
        "ne nous intéresse pas",
        "ne m'intéresse pas",
        "pas besoin",
    ],
    "es": [
        "no nos interesa",
        "no me interesa",
        "no estamos interesados",
        "no estoy interesado",
        "no estoy interesada",
        "sin interés",
        "no tenemos interés",
    ],
    "it": [
        "non sono interessato",
        "non sono interessata",
        "non siamo interessati",
        "non ci interessa",
        "non mi interessa",
        "nessun interesse",
    ],
    "nl": ["geen interesse", "niet geïnteresseerd", "geen behoefte"],
}

# Month names and their abbreviations, per language, for return dates.
MONTHS: dict[str, dict[str, int]] = {
    "en": {
        "january": 1, "jan": 1, "february": 2, "feb": 2, "march": 3, "mar": 3,
        "april": 4, "apr": 4, "may": 5, "june": 6, "jun": 6, "july": 7, "jul": 7,
        "august": 8, "aug": 8, "september": 9, "sept": 9, "sep": 9, "october": 10,
        "oct": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
    },
    "de": {
        "januar": 1, "jänner": 1, "jan": 1, "februar": 2, "feb": 2, "märz": 3,
        "maerz": 3, "mär": 3, "april": 4, "apr": 4, "mai": 5, "juni": 6, "jun": 6,
        "juli": 7, "jul": 7, "august": 8, "aug": 8, "september": 9, "sept": 9,
        "sep": 9, "oktober": 10, "okt": 10, "november": 11, "nov": 11,
        "dezember": 12, "dez": 12,
    },
    "fr": {
        "janvier": 1, "janv": 1, "février": 2, "fevrier": 2, "févr": 2, "fevr": 2,
        "mars": 3, "avril": 4, "avr": 4, "mai": 5, "juin": 6, "juillet": 7,
        "juil": 7, "août": 8, "aout": 8, "septembre": 9, "sept": 9, "octobre": 10,
        "oct": 10, "novembre": 11, "nov": 11, "décembre": 12, "decembre": 12,
        "déc": 12,
    },
    "es": {
        "enero": 1, "ene": 1, "febrero": 2, "feb": 2, "marzo": 3, "mar": 3,
        "abril": 4, "abr": 4, "mayo": 5, "junio": 6, "jun": 6, "julio": 7,
        "jul": 7, "agosto": 8, "ago": 8, "septiembre": 9, "setiembre": 9,
        "sept": 9, "sep": 9, "octubre": 10, "oct": 10, "noviembre": 11, "nov": 11,
        "diciembre": 12, "dic": 12,
    },
    "it": {
        "gennaio": 1, "gen": 1, "febbraio": 2, "feb": 2, "marzo": 3, "mar": 3,
        "aprile": 4, "apr": 4, "maggio": 5, "mag": 5, "giugno": 6, "giu": 6,
        "luglio": 7, "lug": 7, "agosto": 8, "ago": 8, "settembre": 9, "sett": 9,
        "ottobre": 10, "ott": 10, "novembre": 11, "nov": 11, "dicembre": 12, "dic": 12,
    },
    "nl": {
        "januari": 1, "jan": 1, "februari": 2, "feb": 2, "maart": 3, "mrt": 3,
        "april": 4, "apr": 4, "mei": 5, "juni": 6, "jun": 6, "juli": 7, "jul": 7,
        "augustus": 8, "aug": 8, "september": 9, "sept": 9, "sep": 9, "oktober": 10,
        "okt": 10, "november": 11, "nov": 11, "december": 12, "dec": 12,
    },
}  # fmt: skip
# Words that put the return date after them (or, for "wieder"/"zurück"/"back", just
# before them: "am 3. März wieder im Büro").
RETURN_MARKERS_BEFORE = [
    "back", "return", "returning", "returns", "until", "till", "through",
    "wieder", "zurück", "bis", "ab",
    "retour", "jusqu'au", "jusqu'à", "à partir du",
    "vuelta", "regreso", "regresaré", "volveré", "hasta", "a partir del",
    "fino al", "fino a", "rientro", "rientrerò", "tornerò", "ritorno", "a partire dal",
    "tot en met", "t/m", "tot", "terug", "vanaf",
]  # fmt: skip
RETURN_MARKERS_AFTER = [
    "back", "wieder", "zurück", "de retour", "de vuelta", "di nuovo", "di ritorno",
    "rientro", "weer", "terug",
]  # fmt: skip


@dataclass(frozen=True)
class Classification:
    label: str  # OUT_OF_OFFICE, AUTO_REPLY, UNSUBSCRIBE_REQUEST, NOT_NOW, or "" (a reply)
    returns_on: date | None = None  # out_of_office only: the return date the notice gives


def phrase_pattern(phrase: str) -> str:
    """The regular expression of one phrase of the lists above."""
    pieces = [re.escape(piece.strip()) for piece in phrase.split("...")]
    return r"(?<!\w)" + r".{1,40}?".join(pieces) + r"(?!\w)"


def _compile(phrases: list[str]) -> re.Pattern[str]:
    return re.compile("|".join(phrase_pattern(p) for p in phrases))


def normalize(text: str) -> str:
    """Text as the phrases are matched against it (see the module docstring)."""
    text = text.replace("\u2019", "'").replace("\u2018", "'").replace("\xa0", " ")
    return " ".join(text.lower().split())


_OOO = {lang: _compile(phrases) for lang, phrases in OUT_OF_OFFICE_PHRASES.items()}
_AUTO_SUBJECT = _compile([p for ps in AUTO_REPLY_SUBJECT_PHRASES.values() for p in ps])
_TICKET = _compile([p for ps in TICKET_PHRASES.values() for p in ps])
_TICKET_SUBJECT = re.compile(TICKET_SUBJECT, re.IGNORECASE)
_UNSUBSCRIBE = _compile([p for ps in UNSUBSCRIBE_PHRASES.values() for p in ps])
_NOT_NOW = _compile([p for ps in NOT_NOW_PHRASES.values() for p in ps])
_NOT_INTERESTED = _compile([p for ps in NOT_INTERESTED_PHRASES.values() for p in ps])
_REPLY_PREFIX = re.compile(r"^((re|aw|antw|wg|fw|fwd|tr|rv|sv|vs)\s?(\[\d+\])?\s?:\s*)+")


def message_classify(parsed: ParsedMessage, *, received_at: datetime) -> Classification:
    """The label the intake sets on a message (the rules of the module docstring)."""
    subject = normalize(parsed.subject)
    body = normalize(parsed.new_text[:BODY_WINDOW])

    notice = subject + "\n" + body
    automatic = bool(
        parsed.auto_submitted
        or _AUTO_SUBJECT.search(subject)
        or _TICKET.search(subject)
        or _TICKET_SUBJECT.search(parsed.subject)
    )
    first_at = {}
    for language, pattern in _OOO.items():
        # In the subject, a phrase says it; in the body, only of a message that is
        # automatic: a person who writes "I'm on vacation until May 3" replied.
        match = pattern.search(subject) or (pattern.search(body) if automatic else None)
        if match:
            first_at[language] = (
                match.start() if match.string is subject else len(subject) + 1 + match.start()
            )
    if first_at:
        # The language of the first phrase decides how numeric dates read.
        language = min(first_at, key=lambda lang: first_at[lang])
        # The notice's own date, where its sender was; the zone hints at the date order.
        sent = parsed.date
        zone = sent.utcoffset() if sent is not None else None
        local = (
            received_at.astimezone(sent.tzinfo)
            if sent is not None and zone is not None
            else received_at
        )
        return Classification(
            OUT_OF_OFFICE, return_date(notice, language=language, received_at=local, zone=zone)
        )

    if (
        parsed.auto_submitted
        or _AUTO_SUBJECT.search(subject)
        or _TICKET.search(subject)
        or _TICKET.search(body)
        or _TICKET_SUBJECT.search(parsed.subject)
    ):
        return Classification(AUTO_REPLY)

    new_text = normalize(parsed.new_text)
    bare_subject = _REPLY_PREFIX.sub("", subject).strip(" .!")
    if (
        _UNSUBSCRIBE.search(new_text)
        or new_text.strip(" .!") in UNSUBSCRIBE_WHOLE_REPLIES
        or bare_subject in UNSUBSCRIBE_WHOLE_REPLIES
    ):
        return Classification(UNSUBSCRIBE_REQUEST)
    if _NOT_NOW.search(new_text) and not _NOT_INTERESTED.search(new_text):
        return Classification(NOT_NOW)
    return Classification("")


# --- return dates ---------------------------------------------------------------------

# One table for all languages: a name shared by two languages means the same month in
# both (tests/conversations/test_labels.py checks it).
_MONTH_NUMBER: dict[str, int] = {n: m for names in MONTHS.values() for n, m in names.items()}
_MONTH = "|".join(sorted((re.escape(n) for n in _MONTH_NUMBER), key=len, reverse=True))

# The date forms, tried together on the normalized text (docs/conversations.md).
DATE_FORMS = {
    # 2026-03-15
    "iso": r"(?<![\d.])(?P<y>\d{4})-(?P<m>\d{1,2})-(?P<d>\d{1,2})(?!\d)",
    # 15 March 2026, 3rd March, 3. März, 15 mars, 1er mars, 15 de marzo de 2026
    "day month": (
        rf"(?<![\w.])(?P<d>\d{{1,2}})(?:st|nd|rd|th|er|\.|º)?\s?(?:de\s)?(?P<mon>{_MONTH})"
        r"(?!\w)\.?(?:,?\s(?:de\s)?(?P<y>\d{4})(?!\d))?"
    ),
    # March 3, March 3rd, March 3rd, 2026
    "month day": (
        rf"(?<!\w)(?P<mon>{_MONTH})\.?\s(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?![\d:])"
        r"(?:,?\s(?P<y>\d{4})(?!\d))?"
    ),
    # 15.03.2026, 15/03/26, 15.03., 3/15 (only after a return marker when without a year)
    "numeric": (
        r"(?<![\d./-])(?P<a>\d{1,2})(?P<sep>[./-])(?P<b>\d{1,2})"
        r"(?:(?P=sep)(?P<y>\d{4}|\d{2})(?![\d]))?(?![\d]|[/-]\d)"
    ),
}
_DATE_FORMS = {name: re.compile(form) for name, form in DATE_FORMS.items()}
_MARKER_BEFORE = re.compile(
    "|".join(rf"(?<!\w){re.escape(m)}(?!\w)" for m in RETURN_MARKERS_BEFORE)
)
_MARKER_AFTER = re.compile(
    r"^\W{0,3}(?:\w+\s){0,1}(?:" + "|".join(re.escape(m) for m in RETURN_MARKERS_AFTER) + r")\b"
)


# A return date is rarely months after the notice: of two readings of a numeric date,
# one this close wins over one further away.
RETURN_DATE_LIKELY = timedelta(days=62)


@dataclass(frozen=True)
class _Found:
    start: int
    end: int
    readings: tuple[date, ...]  # one, or two for a numeric date read either way
    marked: bool


def date_order(language: str, zone: timedelta | None) -> str:
    """The sender's likely numeric date order: "dmy", "mdy", or "" when unknown.
    German, French, Spanish, Italian, Dutch: day first. English: month first from the
    Americas (a Date header zone from UTC-2:30 to UTC-10), day first from any other
    zone but UTC; unknown from UTC or without a zone (servers such as Exchange Online
    write +0000 for everyone)."""
    if language != "en":
        return "dmy"
    if zone is None or not zone:
        return ""
    hours = zone.total_seconds() / 3600
    return "mdy" if -10 <= hours <= -2.5 else "dmy"


def _dates_in(text: str, *, language: str, order: str, received: date) -> list[_Found]:
    spans: list[tuple[int, int, str, re.Match[str]]] = []
    for name, form in _DATE_FORMS.items():
        for match in form.finditer(text):
            spans.append((match.start(), match.end(), name, match))
    spans.sort(key=lambda s: (s[0], -(s[1] - s[0])))
    found: list[_Found] = []
    last_end = 0
    for start, end, name, match in spans:
        if start < last_end:
            continue  # overlaps a longer date found first
        before = text[max(last_end, start - 30) : start]
        after = text[end : end + 20]
        marked = bool(_MARKER_BEFORE.search(before) or _MARKER_AFTER.search(after))
        readings = _resolve(
            name, match, language=language, order=order, received=received, marked=marked
        )
        last_end = end
        if readings:
            found.append(_Found(start, end, readings, marked))
    return found


def _resolve(
    name: str, match: re.Match[str], *, language: str, order: str, received: date, marked: bool
) -> tuple[date, ...]:
    """The readings of one date: the likely order's first."""
    groups = match.groupdict()
    year = int(groups["y"]) if groups.get("y") else None
    if year is not None and year < 100:
        year += 2000
    if name == "numeric":
        if year is None and not marked:
            return ()  # "3.5" alone is too likely a version or a score
        a, b = int(groups["a"]), int(groups["b"])
        # Only an English slash date may be month first ("3/15"); a dotted or dashed one,
        # and any in another language, is day first.
        if language != "en" or groups["sep"] != "/":
            pairs = [(b, a)]
        elif order == "dmy":
            pairs = [(b, a), (a, b)]
        else:
            pairs = [(a, b), (b, a)]
    elif name == "iso":
        pairs = [(int(groups["m"]), int(groups["d"]))]
    else:
        pairs = [(_MONTH_NUMBER[groups["mon"]], int(groups["d"]))]
    readings = []
    for month, day in pairs:
        when = _on_or_after(year, month, day, received)
        if when is not None and when not in readings:
            readings.append(when)
    return tuple(readings)


def _on_or_after(year: int | None, month: int, day: int, received: date) -> date | None:
    if year is not None:
        try:
            return date(year, month, day)
        except ValueError:
            return None
    for candidate_year in (received.year, received.year + 1, received.year + 4):
        try:
            candidate = date(candidate_year, month, day)
        except ValueError:
            continue
        if candidate >= received:
            return candidate
    return None


def _reading(found: _Found, *, order: str, received: date, stated: set[date]) -> date | None:
    """The one reading of a date: those between the notice and the horizon; of two, the
    one another date of the notice states, then the one within RETURN_DATE_LIKELY,
    then the likely order's, and when the order is unknown, the earlier."""
    horizon = received + RETURN_DATE_HORIZON
    readings = [r for r in found.readings if received <= r <= horizon]
    if len(readings) < 2:
        return readings[0] if readings else None
    agreed = [r for r in readings if r in stated]
    if len(agreed) == 1:
        return agreed[0]
    near = [r for r in readings if r - received <= RETURN_DATE_LIKELY]
    if len(near) == 1:
        return near[0]
    return readings[0] if order else min(readings)


def return_date(
    text: str, *, language: str, received_at: datetime, zone: timedelta | None = None
) -> date | None:
    """The return date an out-of-office notice gives: the latest date after a return
    marker ("back", "until", "wieder", "bis", "retour", "jusqu'au", "vuelta", "hasta",
    "fino al", "tot", ...), else the latest date; a year-less date is its next
    occurrence on or after the notice's date; dates before it or more than 365 days
    after it are ignored. A numeric date that reads two ways is read in the sender's
    likely order (`date_order`: the language and the Date header's zone `zone`), see
    `_reading`."""
    received = received_at.date()
    order = date_order(language, zone)
    found = _dates_in(normalize(text), language=language, order=order, received=received)
    stated = {f.readings[0] for f in found if len(f.readings) == 1}
    dated = []
    for f in found:
        when = _reading(f, order=order, received=received, stated=stated)
        if when is not None:
            dated.append((when, f.marked))
    if not dated:
        return None
    marked = [when for when, is_marked in dated if is_marked]
    return max(marked) if marked else max(when for when, _ in dated)
