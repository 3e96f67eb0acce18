"""The JSON parser every API view uses: DRF's, with two limits a body must meet
before any view sees it.

- Depth: a body nested more than MAX_DEPTH levels is 400 invalid_json (the standard
  library's parser would otherwise recurse until RecursionError, a 500).
- NUL: a NUL character (U+0000) in any key or string is 422 validation_failed at its
  path. PostgreSQL cannot store it in text or jsonb, and no field of this API has a
  use for it. (Contact imports take it per row instead: a bad row is skipped with its
  reason, see outreach.contacts.data.)
"""

import codecs
from collections.abc import Mapping
from typing import IO, Any

from rest_framework import parsers
from rest_framework.exceptions import ParseError, ValidationError
from rest_framework.settings import api_settings
from rest_framework.utils import json

MAX_DEPTH = 64
NUL_MESSAGE = "Null characters are not allowed."


def json_problems(value: object, *, reject_nul: bool = True) -> tuple[str, str] | None:
    """("depth", "") when `value` is nested deeper than MAX_DEPTH, ("nul", path) for
    the first string or key holding a NUL character, None when neither. Iterative:
    a deep document cannot exhaust the stack here."""
    stack: list[tuple[object, str, int]] = [(value, "", 0)]
    while stack:
        item, path, depth = stack.pop()
        if depth > MAX_DEPTH:
            return "depth", ""
        if isinstance(item, str):
            if reject_nul and "\x00" in item:
                return "nul", path or "non_field_errors"
        elif isinstance(item, dict):
            for key, child in item.items():
                child_path = f"{path}.{key}" if path else str(key)
                if reject_nul and "\x00" in key:
                    return "nul", child_path.replace("\x00", "\\u0000")
                stack.append((child, child_path, depth + 1))
        elif isinstance(item, list):
            for index, child in enumerate(item):
                stack.append((child, f"{path}.{index}" if path else str(index), depth + 1))
    return None


class JSONParser(parsers.JSONParser):
    reject_nul = True

    def parse(
        self,
        stream: IO[Any],
        media_type: str | None = None,
        parser_context: Mapping[str, Any] | None = None,
    ) -> Any:
        # get_encoding and a stream reader as json.load's file: both missing from
        # djangorestframework-stubs.
        encoding = parsers.get_encoding(parser_context or {})  # type: ignore[attr-defined]
        try:
            decoded = codecs.getreader(encoding)(stream)
            parse_constant = json.strict_constant if api_settings.STRICT_JSON else None
            data = json.load(decoded, parse_constant=parse_constant)  # type: ignore[arg-type]
        except RecursionError:
            raise ParseError(f"The JSON is nested more than {MAX_DEPTH} levels deep.") from None
        except ValueError as exc:
            raise ParseError(f"JSON parse error - {exc}") from None
        problem = json_problems(data, reject_nul=self.reject_nul)
        if problem is not None:
            kind, path = problem
            if kind == "depth":
                raise ParseError(f"The JSON is nested more than {MAX_DEPTH} levels deep.")
            raise ValidationError({path: [NUL_MESSAGE]})
        return data


class RowsJSONParser(JSONParser):
    """For bodies whose items are validated one by one (contact imports): only the
    depth limit; a NUL inside an item is that item's problem."""

    reject_nul = False
