"""Personalisation of subjects and bodies: substitution only, no template code.

Variables: {{first_name}}, {{last_name}}, {{company}}, {{email}},
{{fields.<name>}}, each with an optional fallback used when the value is empty:
{{first_name|there}}, and in bodies only {{unsubscribe_url}} (the contact's
unsubscribe page). Whitespace inside the braces is allowed. Campaign saves call
`template_errors` so an unknown variable is a 422 at save time; the sending engine
calls `template_render` with the contact.

The campaign's unsubscribe footer (`unsubscribe_footer_text`, `unsubscribe_footer_html`)
is appended by the sending engine to a body part that does not place the link itself.
"""

import html
import re
from collections.abc import Mapping
from typing import Any, Literal

from outreach.contacts.data import FIELD_NAME

CONTACT_VARIABLES = ("first_name", "last_name", "company", "email")
UNSUBSCRIBE_URL = "unsubscribe_url"

# {{ name }} or {{ name | fallback }}; a fallback cannot contain braces.
_VARIABLE = re.compile(r"\{\{\s*([^{}|]*?)\s*(?:\|([^{}]*))?\}\}")
_FIELD_VARIABLE = re.compile(rf"fields\.({FIELD_NAME})")

Kind = Literal["text", "html", "header"]


def _is_known(name: str, *, body: bool = True) -> bool:
    return (
        name in CONTACT_VARIABLES
        or (body and name == UNSUBSCRIBE_URL)
        or _FIELD_VARIABLE.fullmatch(name) is not None
    )


def template_errors(text: str, *, body: bool = False) -> list[str]:
    """What is wrong with a template, as messages for the field; [] when it is fine.
    `body`: a body part, where {{unsubscribe_url}} is allowed too."""
    errors = []
    for match in _VARIABLE.finditer(text):
        name = match.group(1)
        if not _is_known(name, body=body):
            known = "first_name, last_name, company, email, fields.<name>"
            if body:
                known += " or unsubscribe_url"
            elif name == UNSUBSCRIBE_URL:
                known += " (unsubscribe_url only in body_text and body_html)"
            errors.append(f"Unknown variable {{{{{name}}}}}. Use {known}.")
    leftover = _VARIABLE.sub("", text)
    if "{{" in leftover or "}}" in leftover:
        errors.append("Unbalanced braces: a variable is written {{name}} or {{name|fallback}}.")
    return errors


def places_variable(text: str, name: str) -> bool:
    """Whether the template substitutes the variable `name` somewhere."""
    return any(match.group(1) == name for match in _VARIABLE.finditer(text))


def contact_values(contact: Any) -> dict[str, object]:
    """The values a template can name, from a Contact (or anything with those attributes)."""
    return {
        "first_name": contact.first_name,
        "last_name": contact.last_name,
        "company": contact.company,
        "email": contact.email,
        "fields": contact.fields or {},
    }


def _lookup(name: str, values: Mapping[str, object]) -> str:
    field = _FIELD_VARIABLE.fullmatch(name)
    if field:
        custom = values.get("fields") or {}
        value = custom.get(field.group(1), "") if isinstance(custom, Mapping) else ""
    else:
        value = values.get(name, "")
    return "" if value is None else str(value)


def template_render(text: str, values: Mapping[str, object], *, kind: Kind = "text") -> str:
    """Substitute the variables of a validated template.

    kind="html" escapes the values (and fallbacks) for an HTML body; kind="header"
    folds line breaks into spaces so a value cannot inject a header. An unknown
    variable renders as the empty string (templates are validated at save time).
    """

    def replace(match: re.Match[str]) -> str:
        name, fallback = match.group(1), match.group(2)
        value = _lookup(name, values) if _is_known(name) else ""
        if not value.strip() and fallback is not None:
            value = fallback.strip()
        if kind == "html":
            return html.escape(value)
        if kind == "header":
            return " ".join(value.splitlines())
        return value

    rendered = _VARIABLE.sub(replace, text)
    if kind == "header":
        rendered = " ".join(rendered.splitlines())
    return rendered


# The opt-out line of the campaign's unsubscribe footer.
FOOTER_TEXT = "Don't want to hear from me again? Unsubscribe:"
FOOTER_LINK_TEXT = "Unsubscribe"
FOOTER_HTML_INTRO = "Don't want to hear from me again?"


def unsubscribe_footer_text(text: str, url: str) -> str:
    """A plain-text body with the opt-out line appended."""
    return f"{text.rstrip()}\n\n--\n{FOOTER_TEXT} {url}\n"


def unsubscribe_footer_html(url: str) -> str:
    """The HTML opt-out line: the URL escaped as an attribute value, the words as text."""
    return (
        '<p style="font-size:12px;color:#777777">'
        f"{html.escape(FOOTER_HTML_INTRO)} "
        f'<a href="{html.escape(url, quote=True)}">{html.escape(FOOTER_LINK_TEXT)}</a></p>'
    )
