"""The audit tests' guard: no row any of them leaves holds a value that was used.

`used_values` collects what a test sent or was given (passwords, keys, tokens, secrets,
body texts); after the test every audit row, every column of it, is searched for each.
The API key of the `api_key` fixture is always among them.
"""

import contextlib
import json
from collections.abc import Iterator

import pytest
from django.forms.models import model_to_dict

from accounts.models import AuditEvent

# Keys of a response whose values are secrets shown once.
SECRET_KEYS = {"plaintext", "secret", "password", "token", "authorize_url", "url"}


def string_leaves(value) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from string_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from string_leaves(item)


def secret_leaves(value) -> Iterator[str]:
    """Strings under SECRET_KEYS, at any depth."""
    if isinstance(value, dict):
        for key, item in value.items():
            if key in SECRET_KEYS:
                yield from string_leaves(item)
            else:
                yield from secret_leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from secret_leaves(item)


class UsedValues(set):
    def add_body(self, body) -> None:
        """Every string of a request body (a value; field names may be recorded)."""
        self.update(string_leaves(body))

    def add_response(self, response) -> None:
        with contextlib.suppress(ValueError, TypeError):
            self.update(secret_leaves(response.json()))


@pytest.fixture
def used_values(request) -> UsedValues:
    return UsedValues()


@pytest.fixture(autouse=True)
def _rows_hold_no_used_value(request, used_values):
    if "api_key" in request.fixturenames:
        used_values.add(request.getfixturevalue("api_key").plaintext)
    if not request.node.get_closest_marker("django_db"):
        yield
        return
    yield
    # Values shorter than 6 characters ("Hi", "x") would match ids and names by chance.
    values = {v for v in used_values if len(v) >= 6}
    for row in AuditEvent.objects.all():
        text = json.dumps(model_to_dict(row), default=str)
        leaked = sorted(v for v in values if v in text)
        assert not leaked, f"audit row {row.action} holds {leaked}"
