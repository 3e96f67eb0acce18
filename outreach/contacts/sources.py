"""Reading an import's source (CSV bytes or a JSON contacts array) into raw rows.

Header mapping (case-insensitive; spaces, hyphens and dots count as underscores):
- email: email, email_address, e_mail, e_mail_address, emailaddress, mail
- first_name: first_name, firstname, first, given_name
- last_name: last_name, lastname, last, surname, family_name
- company: company, company_name, organization, organisation
- timezone: timezone, time_zone (an IANA name such as Asia/Tokyo; an unknown one
  rejects the row)
- any other column becomes a custom field named after the header, lower-cased with
  runs of other characters turned into "_" ("Job Title" -> job_title; a
  "fields.x" header maps to x). Columns with an empty header are ignored.
"""

import csv
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from outreach.contacts.data import STANDARD

ALIASES = {
    "email": ("email", "email_address", "e_mail", "e_mail_address", "emailaddress", "mail"),
    "first_name": ("first_name", "firstname", "first", "given_name"),
    "last_name": ("last_name", "lastname", "last", "surname", "family_name"),
    "company": ("company", "company_name", "organization", "organisation"),
    "timezone": ("timezone", "time_zone"),
}
# Keys a row carries itself; any other column or key is a custom field.
ROW_KEYS = frozenset(("email", *STANDARD, "timezone"))
_BY_ALIAS = {alias: target for target, aliases in ALIASES.items() for alias in aliases}
_DELIMITERS = (",", ";", "\t")


class SourceError(ValueError):
    """The file cannot be imported at all: the import ends `failed` with this reason."""


def _header_key(raw: str) -> str:
    text = raw.strip().lower()
    if text.startswith("fields."):
        text = text[len("fields.") :]
    return re.sub(r"[^a-z0-9]+", "_", text).strip("_")[:64]


@dataclass(frozen=True)
class Row:
    number: int  # CSV: the spreadsheet row (header = 1). JSON: index in `contacts`.
    raw: dict[str, Any]


class CsvSource:
    """A decoded, structurally checked CSV. `rows()` yields the non-blank data rows."""

    def __init__(self, data: bytes):
        if b"\x00" in data:
            raise SourceError("The file is not CSV text (it contains NUL bytes).")
        try:
            self.text = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise SourceError(
                f"The file is not UTF-8 text (invalid byte at offset {exc.start}). "
                "Save it as CSV UTF-8."
            ) from None
        first_line = self.text.splitlines()[0] if self.text.strip() else ""
        if not first_line.strip():
            raise SourceError("The file is empty: a header row with an email column is required.")
        self.delimiter, self.columns = self._header(first_line)
        # Walk the whole file once: a structural error fails the import before any write,
        # and total_rows is known for the progress.
        self.total_rows = sum(1 for _ in self.rows())

    def _header(self, line: str) -> tuple[str, list[str | None]]:
        for delimiter in _DELIMITERS:
            try:
                cells = next(csv.reader([line], delimiter=delimiter))
            except csv.Error:
                continue
            keys = [_header_key(cell) for cell in cells]
            if any(_BY_ALIAS.get(key) == "email" for key in keys):
                columns: list[str | None] = []
                seen: set[str] = set()
                for key in keys:
                    target = _BY_ALIAS.get(key, key) if key else None
                    # A repeated column: the first one counts.
                    columns.append(target if target and target not in seen else None)
                    if target:
                        seen.add(target)
                return delimiter, columns
        raise SourceError(
            "No email column: the first row must be a header naming an 'email' column "
            "(comma, semicolon or tab separated)."
        )

    def rows(self, skip: int = 0) -> Iterator[Row]:
        # strict: an unterminated quote is an error, not the rest of the file in one cell.
        reader = csv.reader(
            io.StringIO(self.text, newline=""), delimiter=self.delimiter, strict=True
        )
        try:
            next(reader)  # header
            number = 1
            yielded = 0
            for cells in reader:
                number += 1
                if not any(cell.strip() for cell in cells):
                    continue  # blank line: not a row
                yielded += 1
                if yielded <= skip:
                    continue
                yield Row(number, self._raw(cells))
        except csv.Error as exc:
            raise SourceError(f"Malformed CSV near row {number + 1}: {exc}.") from None

    def _raw(self, cells: list[str]) -> dict[str, Any]:
        raw: dict[str, Any] = {"fields": {}}
        for target, cell in zip(self.columns, cells, strict=False):
            if target is None:
                continue
            if target in ROW_KEYS:
                raw[target] = cell
            else:
                raw["fields"][target] = cell
        return raw


class JsonSource:
    """The JSON `contacts` array: keys other than the standard ones go to fields."""

    def __init__(self, data: bytes):
        try:
            items = json.loads(data)
        except ValueError:
            raise SourceError("The stored contacts are not valid JSON.") from None
        if not isinstance(items, list):
            raise SourceError("contacts must be an array.")
        self.items = items
        self.total_rows = len(items)

    def rows(self, skip: int = 0) -> Iterator[Row]:
        for index, item in enumerate(self.items):
            if index < skip:
                continue
            if not isinstance(item, dict):
                yield Row(index, {"__invalid__": "Each contact must be an object."})
                continue
            given = item.get("fields")
            raw: dict[str, Any] = {
                "fields": dict(given) if isinstance(given, dict) else (given or {})
            }
            for key, value in item.items():
                if key == "fields":
                    continue
                if key in ROW_KEYS:
                    raw[key] = value
                elif isinstance(raw["fields"], dict):
                    raw["fields"][key] = value
            yield Row(index, raw)
