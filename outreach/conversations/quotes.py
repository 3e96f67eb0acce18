"""The new part of a reply: its text without the quoted earlier message and the
signature (best effort). Pure functions, no database.

`new_text`: the reply without the quoted earlier message and the signature. From the
plain text, it is everything above the first of these lines (`QUOTE_MARKERS`):
- an attribution line, also wrapped over two or three lines, holding a digit:
  `On <date>, <name> wrote:` (Gmail, Apple Mail `On 3 Mar 2025, at 10:00, ...`,
  Thunderbird), `Am <date> schrieb <name>:`, `Le <date>, <name> a écrit :`,
  `El <date>, <name> escribió:`;
- a separator: `-----Original Message-----`, `-----Ursprüngliche Nachricht-----`,
  `-----Message d'origine-----`, `-----Mensaje original-----`, and the forwarded
  message lines (`---------- Forwarded message ---------` and its translations);
- Outlook's `________________________________` line;
- a header block: a `From:` / `Von:` / `De :` / `De:` line followed within five lines
  by `Sent:` / `Date:` / `Gesendet:` / `Datum:` / `Envoyé :` / `Date :` /
  `Enviado:` / `Enviado el:` / `Fecha:` (also `*From:*` as Gmail writes bold);
- the signature separator `-- ` (or `--`), and the mobile signatures
  `Sent from my <device>`, `Get Outlook for <platform>`, `Von meinem <device> gesendet`,
  `Envoyé de mon <device>`, `Enviado desde mi <device>`.
Any other client's attribution counts too when it is the line just above a `>` quote,
ends with `:` and holds a digit or an `@`. Lines that start with `>` are dropped
wherever they are. When the plain text shows no
marker and the HTML has a quote of its own, the HTML gives the cut: the Gmail quote
(`class="gmail_quote"`), the Apple Mail and Thunderbird quote (`<blockquote
type="cite">`), Outlook's reply header (`id="divRplyFwdMsg"`, `id="appendonsend"`,
`id="mail-editor-reference-message-container"`: everything after it is the earlier
message), Yahoo's `yahoo_quoted`, and the signatures `gmail_signature`,
`moz-signature`. A reply written between the quoted lines keeps its own lines; one
written under an attribution line is cut there (best effort).
"""

import re

from outreach.conversations.html import newlines_normalize

# Attribution lines, per language: they end with the verb and a colon; with a digit in
# them (a date or time), also when a client wrapped them over two or three lines.
ATTRIBUTION_PATTERNS = {
    "en": r"^on\b.{4,400}\bwrote\s?:$",
    "de": r"^am\b.{4,400}\bschrieb\b.{0,400}:$",
    "fr": r"^le\b.{4,400}\ba\s+écrit\s?:$",
    "es": r"^el\b.{4,400}\bescribió\s?:$",
}
SEPARATOR_PATTERNS = {
    "en": r"^-{2,}\s*(original message|forwarded message)\s*-{2,}$",
    "de": r"^-{2,}\s*(ursprüngliche nachricht|originalnachricht|weitergeleitete nachricht)\s*-{2,}$",
    "fr": r"^-{2,}\s*(message d'origine|message original|message transféré)\s*-{2,}$",
    "es": r"^-{2,}\s*(mensaje original|mensaje reenviado)\s*-{2,}$",
    "outlook": r"^_{20,}$",
}
HEADER_FROM = r"^\*?(from|von|de|da)\s?:\*?\s*\S"
HEADER_SENT = r"^\*?(sent|date|gesendet|datum|envoyé|date|enviado|enviado el|fecha)\s?:\*?\s*\S"
SIGNATURE_PATTERNS = {
    "separator": r"^--\s?$",
    "en": r"^(sent from my \S+( \S+)?|sent from outlook for \S+|get outlook for \S+)\.?$",
    "de": r"^von meinem \S+( \S+)? gesendet\.?$",
    "fr": r"^envoyé de mon \S+( \S+)?\.?$",
    "es": r"^enviado desde mi \S+( \S+)?\.?$",
}
QUOTE_MARKERS = {
    "attribution": ATTRIBUTION_PATTERNS,
    "separator": SEPARATOR_PATTERNS,
    "header block": {"from": HEADER_FROM, "sent": HEADER_SENT},
    "signature": SIGNATURE_PATTERNS,
}

_ATTRIBUTION = [re.compile(p, re.IGNORECASE | re.DOTALL) for p in ATTRIBUTION_PATTERNS.values()]
_SEPARATOR = [re.compile(p, re.IGNORECASE) for p in SEPARATOR_PATTERNS.values()]
_SIGNATURE = [re.compile(p, re.IGNORECASE) for p in SIGNATURE_PATTERNS.values()]
_HEADER_FROM = re.compile(HEADER_FROM, re.IGNORECASE)
_HEADER_SENT = re.compile(HEADER_SENT, re.IGNORECASE)
_HEADER_FIELD = re.compile(r"^\*?[\w-]{2,20}( [\w-]{2,10})?\s?:\*?\s", re.IGNORECASE)


def _is_attribution(lines: list[str], i: int) -> bool:
    joined = lines[i].strip()
    for extra in range(3):
        if extra:
            if i + extra >= len(lines) or not lines[i + extra].strip():
                return False
            joined += " " + lines[i + extra].strip()
        if len(joined) > 500:
            return False
        if any(ch.isdigit() for ch in joined) and any(p.match(joined) for p in _ATTRIBUTION):
            return True
    return False


def _is_header_block(lines: list[str], i: int) -> bool:
    if not _HEADER_FROM.match(lines[i].strip()):
        return False
    return any(_HEADER_SENT.match(line.strip()) for line in lines[i + 1 : i + 6])


def _is_marker(lines: list[str], i: int) -> bool:
    line = lines[i].strip()
    if not line or line.startswith(">"):
        return False
    if any(p.match(line) for p in _SEPARATOR):
        if line.startswith("_"):  # Outlook's line: a header field must follow
            rest = [x.strip() for x in lines[i + 1 : i + 4] if x.strip()]
            return bool(rest) and bool(_HEADER_FIELD.match(rest[0]))
        return True
    if any(p.match(line) for p in _SIGNATURE):
        return True
    return _is_header_block(lines, i) or _is_attribution(lines, i)


def quote_cut(text: str) -> tuple[str, bool]:
    """The new part of a reply's text, and whether a quote marker was found (see the
    module docstring for the markers)."""
    lines = newlines_normalize(text).split("\n")
    found = False
    for i, line in enumerate(lines):
        if _is_marker(lines, i):
            lines = lines[:i]
            found = True
            break
        if line.lstrip().startswith(">"):
            # Any client's attribution: the line just above the quote, ending in ":"
            # and holding a date or an address ("2025年3月3日(月) 10:00 Anna <a@b>:").
            k = i - 1
            while k >= 0 and not lines[k].strip():
                k -= 1
            above = lines[k].strip() if k >= 0 else ""
            if (
                above.endswith(":")
                and len(above) <= 300
                and ("@" in above or any(ch.isdigit() for ch in above))
            ):
                lines = lines[:k]
                found = True
                break
    kept = [line for line in lines if not line.lstrip().startswith(">")]
    if len(kept) != len(lines):
        found = True
    out: list[str] = []
    for line in kept:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return "\n".join(out).strip("\n"), found
