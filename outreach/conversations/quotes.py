"""The new part of a reply: its text without the quoted earlier message and the
signature (best effort). Pure functions, no database.

`new_text` is read line by line (docs/conversations.md, "The new part of a reply"):
- a **marker** (`QUOTE_MARKERS`: an attribution line such as `On <date>, <name> wrote:`
  in one of many languages, also wrapped over up to four lines; a separator such as
  `-----Original Message-----`; a header block such as `From:` / `Sent:`; a signature
  such as `-- ` or `Sent from my iPhone`) ends the person's words when the earlier
  message follows it unmarked (Outlook's top-posting). When a `>` quote follows an
  attribution or a separator instead, the person may answer below or between the quoted
  lines (Thunderbird's bottom-posting, inline answers): their unquoted lines after it
  are kept, up to the next marker that is not followed by a quote;
- lines that start with `>` are dropped (without any marker, only when there are at
  least two of them: one `>>>` line is more often an arrow than a quote);
- a forwarded message's line (`---------- Forwarded message ---------`) as the first
  marker keeps everything: the forwarded message is what the person sent;
- `fallback`: when the cut would leave nothing, or only a greeting, the text without
  its quoted lines is kept instead: the person's words are never lost.
"""

import re

from outreach.conversations.html import newlines_normalize
from outreach.conversations.reply_forms import (
    ATTRIBUTION_STARTS,
    ATTRIBUTION_VERBS,
    ATTRIBUTION_VERBS_BEFORE_NAME,
    FORWARD_WORDS,
    GREETING,
    HEADER_DATE_FIELDS,
    HEADER_FROM_FIELDS,
    HEADER_OTHER_FIELDS,
    SEPARATOR_PHRASES,
    SIGNATURE_PATTERNS,
)


def _alternation(words: list[str]) -> str:
    unique = sorted({w for w in words}, key=len, reverse=True)
    return "|".join(re.escape(w).replace(r"\ ", r"\s+") for w in unique)


_STARTS = _alternation([w for ws in ATTRIBUTION_STARTS.values() for w in ws])
_ALL_VERBS = [w for ws in ATTRIBUTION_VERBS.values() for w in ws]
# A verb in a script without spaces (書きました, 写道, 작성) follows any character.
_VERBS = (
    r"(?<!\w)(?:"
    + _alternation([w for w in _ALL_VERBS if w.isascii() or w[0].isalpha() and ord(w[0]) < 0x2E80])
    + r")|(?:"
    + _alternation([w for w in _ALL_VERBS if not w.isascii() and ord(w[0]) >= 0x2E80])
    + ")"
)
_FLAGS = re.IGNORECASE | re.DOTALL
# "<start> ... <verb>:" and "... <verb>:" (a verb ends the line, before a colon).
_VERB_END = re.compile(rf"^(?P<start>(?:{_STARTS})\s)?.{{2,500}}?(?:{_VERBS})$", _FLAGS)
_ON_SENT = re.compile(r"^on\s.{2,500}?\ssent$", _FLAGS)
# "Am <date> schrieb <name>:", "Op <date> schreef <name>:", "Den <date> skrev <name>:".
_VERB_MIDDLE = re.compile(
    rf"^(?:{_STARTS})\s.{{2,300}}?(?<!\w)(?:{_alternation(ATTRIBUTION_VERBS_BEFORE_NAME)})"
    r"\s.{1,300}$",
    _FLAGS,
)
# Any client: a date or a time and an address, then the colon (Gmail's
# "2016-03-03 17:21 GMT+01:00 Some One <some@one.com>:", Gmail in Japanese or Russian
# "2025年3月3日(月) 10:00 Anna <a@b.example>:").
_DATED_ADDRESS = re.compile(
    r"^(?=.*\d[:.]\d\d)(?=.*[<(\[]\s?[^\s<>()]*@[^\s<>()]+\s?[>)\]]).{4,500}$", _FLAGS
)
# Gmail's old "2011/4/7 Name <address>" without a colon.
_DATE_FIRST = re.compile(
    r"^(\d{4}[-/.]\d{1,2}[-/.]\d{1,2}|\d{1,2}[-/.]\d{1,2}[-/.]\d{2,4})\s.{0,300}<\s?[^\s<>]+@[^\s<>]+>$",
    _FLAGS,
)
_STARTS_LIKE = re.compile(rf"^[-*\s]*((?:{_STARTS})\s|\d{{1,4}}[-/.]\d)", re.IGNORECASE)
_INNER_START = re.compile(rf"(?:\s|-)(?=(?:{_STARTS})\s)", re.IGNORECASE)

_SEPARATOR = re.compile(
    r"^\*?-{2,}\s*("
    + _alternation([p for ps in SEPARATOR_PHRASES.values() for p in ps])
    + r")\s*-{2,}\*?$|^(begin forwarded message|anfang der weitergeleiteten nachricht"
    r"|début du message réexpédié|inicio del mensaje reenviado)\s?:$",
    re.IGNORECASE,
)
_FORWARD = re.compile(
    _alternation(FORWARD_WORDS) + r"|begin forwarded|weitergeleiteten|réexpédié", re.I
)
# "---- John Smith wrote ----" (Android, Zoho): a verb between dashes needs no digit.
_DASHED_VERB = re.compile(rf"^-{{2,}}.{{1,300}}?(?:{_VERBS})\s?-{{2,}}$", _FLAGS)
_OUTLOOK_LINE = re.compile(r"^_{20,}$")


def _field(names: list[str]) -> re.Pattern[str]:
    return re.compile(rf"^\*?(?:{_alternation(names)})\*?\s?[:：]\*?(?P<value>.*)$", re.I)


_HEADER_FROM = _field(HEADER_FROM_FIELDS)
_HEADER_DATE = _field(HEADER_DATE_FIELDS)
_HEADER_ANY = _field(HEADER_FROM_FIELDS + HEADER_DATE_FIELDS + HEADER_OTHER_FIELDS)
_SIGNATURE = re.compile("|".join(f"(?:{p})" for p in SIGNATURE_PATTERNS.values()), re.I)
_GREETING = re.compile(GREETING, re.IGNORECASE)
_WORD = re.compile(r"[^\W\d_]{2,}")
_URL = re.compile(r"\S*(https?://|www\.|mailto:)\S*", re.IGNORECASE)
_LINK_PIECE = re.compile(r"[\w.?:-]*[=/&%#][\w=&%/.?#:-]*\)?")


def _clean(line: str) -> str:
    return line.replace("\xa0", " ").replace("\u200b", "").strip()


# --- markers ---------------------------------------------------------------------------


def _attribution(text: str) -> bool:
    """Whether `text` (one line, or lines joined with spaces) is an attribution."""
    if len(text) > 600:
        return False
    if _DASHED_VERB.match(text):
        return True
    body = text.strip("-* ").rstrip()
    colon = body.endswith((":", "："))
    dashed = text.rstrip().endswith("--")
    body = body.rstrip(":：").rstrip()
    if not (colon or dashed) and not _DATE_FIRST.match(body):
        return False
    if not any(ch.isdigit() for ch in body) and "@" not in body:
        return False
    return bool(
        _VERB_END.match(body)
        or _ON_SENT.match(body)
        or _VERB_MIDDLE.match(body)
        or (colon and _DATED_ADDRESS.match(body))
        or _DATE_FIRST.match(body)
    )


def _joined(lines: list[str], i: int, extra: int) -> tuple[str, int] | None:
    """Line i and the `extra` lines after it, joined with spaces, and the number of lines
    taken. A blank line is crossed only inside an address's angle brackets (Polymail's
    `John Smith` / `` / `<` / `mailto:...>` / `> wrote:`)."""
    parts = [lines[i]]
    k = i
    while extra:
        k += 1
        if k >= len(lines):
            return None
        line = lines[k]
        joined = " ".join(parts)
        if not line:
            if k + 1 < len(lines) and lines[k + 1].startswith("<"):
                continue
            return None
        if line.startswith(">") and joined.count("<") <= joined.count(">"):
            return None
        parts.append(line)
        extra -= 1
    return " ".join(parts), k - i + 1


def _attribution_at(lines: list[str], i: int) -> int:
    """The number of lines of the attribution that starts at line i, else 0."""
    for extra in range(4):
        got = _joined(lines, i, extra)
        if got is None:
            return 0
        text, taken = got
        if text.endswith((":", "：", "-", ">")) and _attribution(text):
            # Wrapped: the attribution may start on the next line (whose own join is
            # shorter); then it is found there.
            # ("Hello" / "02.04.2012 14:20 ... <" / "bob@x> написал:"). The line is
            # the start when it holds a date and the next one does not start like one.
            later = _joined(lines, i + 1, extra - 1) if extra else None
            if (
                later is not None
                and _attribution(later[0])
                and (not any(ch.isdigit() for ch in lines[i]) or _STARTS_LIKE.match(later[0]))
            ):
                return 0
            return taken
    return 0


def _header_block_at(lines: list[str], i: int) -> bool:
    line = lines[i]
    following = lines[i + 1 : i + 7]
    sender = _HEADER_FROM.match(line)
    if sender and sender["value"].strip():
        if "@" in sender["value"]:
            return True
        return any(_HEADER_DATE.match(x) for x in following)
    dated = _HEADER_DATE.match(line)
    if dated and any(ch.isdigit() for ch in dated["value"]):
        return any(_HEADER_ANY.match(x) for x in following[:3] if x)
    return False


def _marker_at(lines: list[str], i: int) -> tuple[str, int]:
    """The kind of marker at line i ("attribution", "separator", "forward", "header",
    "signature") and its number of lines, or ("", 0)."""
    line = lines[i]
    if not line or line.startswith(">"):
        return "", 0
    if _SEPARATOR.match(line):
        return ("forward" if _FORWARD.search(line) else "separator"), 1
    if _OUTLOOK_LINE.match(line):
        rest = [x for x in lines[i + 1 : i + 4] if x]
        return ("separator", 1) if rest and _HEADER_ANY.match(rest[0]) else ("", 0)
    if _SIGNATURE.match(line):
        return "signature", 1
    if _header_block_at(lines, i):
        return "header", 1
    taken = _attribution_at(lines, i)
    if taken:
        return "attribution", taken
    return "", 0


def _split_shared_line(line: str) -> tuple[str, str] | None:
    """`reply On <date>, <name> wrote:` on one line: the reply's part and the attribution."""
    if _STARTS_LIKE.match(line):
        return None
    for match in _INNER_START.finditer(line):
        head, tail = line[: match.start()], line[match.end() :]
        if head.strip(" -") and _attribution(tail.strip()):
            return head.rstrip(" -"), tail
    return None


def _link_rest(lines: list[str], i: int) -> bool:
    """An unquoted line right between two quoted lines that is only the rest of a
    wrapped link (`(http://example.com/c/x) >`, `_nonce=3dd518)`): part of the quote."""
    if not (
        0 < i < len(lines) - 1 and lines[i - 1].startswith(">") and lines[i + 1].startswith(">")
    ):
        return False
    line = lines[i]
    return not _WORD.search(_URL.sub(" ", line)) or bool(_LINK_PIECE.fullmatch(line))


# --- the cut ---------------------------------------------------------------------------


def quote_cut(text: str) -> tuple[str, bool]:
    """The new part of a reply's text, and whether a quote marker was found (see the
    module docstring and docs/conversations.md)."""
    lines = newlines_normalize(text).split("\n")
    clean = [_clean(line) for line in lines]  # what the markers are read from
    quoted_count = sum(1 for line in clean if line.startswith(">"))
    kept: list[str] = []
    found = False
    in_quote = False  # after a marker followed by a `>` quote
    dropping = False  # blank lines right after what was dropped go with it
    i = 0
    while i < len(lines):
        line = lines[i]
        if not clean[i]:
            if not dropping:
                kept.append(line)
            i += 1
            continue
        if clean[i].startswith(">"):
            if found or quoted_count >= 2:
                found = in_quote = dropping = True
                i += 1
                continue
            kept.append(line)
            dropping = False
            i += 1
            continue
        kind, taken = _marker_at(clean, i)
        if kind == "attribution" or (not kind and _quote_follows(clean, i + 1)):
            shared = _split_shared_line(clean[i])
            if shared:  # "reply On <date>, <name> wrote:" on one line
                kept.append(shared[0])
                kind, taken = "attribution", taken or 1
        if kind:
            if kind == "forward" and not found:
                return _tidy(lines), False
            found = True
            if kind == "signature":
                break
            if _quote_follows(clean, i + taken):
                in_quote = dropping = True
                i += taken
                continue
            break
        if _generic_attribution(clean, i):
            found = dropping = True
            i += 1
            continue
        if in_quote and _link_rest(clean, i):
            i += 1
            continue
        kept.append(line)
        dropping = False
        i += 1
    new_text = _tidy(kept)
    if not words_of_their_own(new_text):
        return _fallback(lines, clean, new_text), found
    return new_text, found


def _fallback(lines: list[str], clean: list[str], new_text: str) -> str:
    """The text without its quoted lines, when it holds words beyond the cut's (other
    than the markers' own): the person wrote under the marker without quoting."""
    unquoted = [(i, line) for i, line in enumerate(lines) if not clean[i].startswith(">")]
    beyond = _tidy([line for i, line in unquoted if not _marker_at(clean, i)[0]])
    if _words(beyond) > _words(new_text):
        return _tidy([line for _, line in unquoted])
    return new_text


def _words(text: str) -> int:
    return len(re.findall(r"[^\W_]+", text))


def _quote_follows(clean: list[str], j: int) -> bool:
    while j < len(clean) and not clean[j]:
        j += 1
    return j < len(clean) and clean[j].startswith(">")


def _generic_attribution(lines: list[str], i: int) -> bool:
    """Any client's attribution: the line just above a `>` quote, ending in ":" and
    holding a date or an address ("2025年3月3日(月) 10:00 Anna <a@b>:")."""
    above = lines[i]
    return (
        above.endswith((":", "："))
        and len(above) <= 300
        and ("@" in above or any(ch.isdigit() for ch in above))
        and _quote_follows(lines, i + 1)
    )


def _has_words(text: str) -> bool:
    return bool(re.search(r"[^\W_]", text))


def words_of_their_own(text: str) -> bool:
    """Whether a cut text holds the person's words: any word beyond a greeting alone."""
    return _has_words(text) and not _GREETING.match(text)


def _tidy(lines: list[str]) -> str:
    out: list[str] = []
    for line in lines:
        line = line.rstrip()
        if not line and (not out or not out[-1]):
            continue
        out.append(line)
    return "\n".join(out).strip("\n")
