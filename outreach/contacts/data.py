"""One contact's data as it arrives (API body, CSV row, JSON import item), cleaned,
and the merge rule used when it meets an existing contact."""

import re
from dataclasses import dataclass, field
from typing import Any

from outreach.emails import InvalidEmail, email_clean
from outreach.timezones import timezone_errors

NAME_MAX = 200
FIELD_VALUE_MAX = 2000
FIELD_KEY_MAX = 64
FIELDS_MAX = 50
STANDARD = ("first_name", "last_name", "company")

# A custom field's key, as templates name it (`{{ fields.<key> }}`, outreach.campaigns.rendering).
FIELD_NAME = r"[A-Za-z0-9_\-]+"
_FIELD_KEY = re.compile(FIELD_NAME)


class InvalidContactData(ValueError):
    def __init__(self, field_name: str, message: str):
        self.field_name = field_name
        self.message = message
        super().__init__(f"{field_name}: {message}")


@dataclass
class ContactData:
    email: str
    first_name: str = ""
    last_name: str = ""
    company: str = ""
    fields: dict[str, str] = field(default_factory=dict)
    timezone: str = ""  # IANA name, or "": the campaign's zone applies

    @property
    def key(self) -> str:
        return self.email.lower()

    def absorb(self, later: "ContactData") -> None:
        """A later row for the same email: its non-empty values win, custom fields merge."""
        for name in (*STANDARD, "timezone"):
            value = getattr(later, name)
            if value:
                setattr(self, name, value)
        self.fields.update(later.fields)


def fields_errors(value: object) -> str | None:
    if not isinstance(value, dict):
        return "Must be an object of string values."
    if len(value) > FIELDS_MAX:
        return f"At most {FIELDS_MAX} custom fields."
    for key, item in value.items():
        if not isinstance(key, str) or not _FIELD_KEY.fullmatch(key) or len(key) > FIELD_KEY_MAX:
            return (
                f"Field name {key!r} must be 1 to {FIELD_KEY_MAX} letters, digits, "
                "underscores or hyphens."
            )
        if not isinstance(item, str):
            return f"Field {key!r} must be a string."
        if "\x00" in item:
            return f"Field {key!r} holds a null character."
        if len(item) > FIELD_VALUE_MAX:
            return f"Field {key!r} is longer than {FIELD_VALUE_MAX} characters."
    return None


def contact_data_clean(raw: dict[str, Any]) -> ContactData:
    """Clean one contact (email, first_name, last_name, company, fields); raises
    InvalidContactData naming the offending field."""
    try:
        email = email_clean(raw.get("email"))
    except InvalidEmail as exc:
        raise InvalidContactData("email", str(exc)) from None
    values = {}
    for name in STANDARD:
        value = raw.get(name)
        if value is None:
            value = ""
        if not isinstance(value, str):
            raise InvalidContactData(name, "Must be a string.")
        if "\x00" in value:
            raise InvalidContactData(name, "Null characters are not allowed.")
        value = value.strip()
        if len(value) > NAME_MAX:
            raise InvalidContactData(name, f"Longer than {NAME_MAX} characters.")
        values[name] = value
    custom = raw.get("fields")
    if custom is None:
        custom = {}
    problem = fields_errors(custom)
    if problem:
        raise InvalidContactData("fields", problem)
    # Empty custom values carry nothing (an empty CSV cell is "no value").
    cleaned_fields = {k: v.strip() for k, v in custom.items() if v.strip()}
    return ContactData(
        email=email, fields=cleaned_fields, timezone=timezone_clean(raw.get("timezone")), **values
    )


def timezone_clean(value: object) -> str:
    """An IANA name, or "" for none; raises InvalidContactData otherwise."""
    problem = timezone_errors(value)
    if problem:
        raise InvalidContactData("timezone", problem)
    return value.strip() if isinstance(value, str) else ""
