"""Every event the service emits in a test is held to its published schema.

After each test that used the database and passed, every Event row is validated
against its type's JSON Schema in the catalog (webhooks.catalog, served by
GET /webhook_event_types); a payload that does not match fails the test that made
the service emit it. Tests that emit made-up payloads themselves (to exercise the
outbox with whatever data) carry the `synthetic_events` marker and are skipped.
"""

import pytest
from jsonschema import Draft202012Validator

from webhooks.catalog import EVENT_CATALOG

_VALIDATORS = {
    name: Draft202012Validator(item.schema, format_checker=Draft202012Validator.FORMAT_CHECKER)
    for name, item in EVENT_CATALOG.items()
}


def event_problems(event_type: str, data) -> list[str]:
    """What is wrong with one event's data against its schema (empty when valid)."""
    validator = _VALIDATORS.get(event_type)
    if validator is None:
        return [f"{event_type!r} is not in the catalog"]
    return [
        f"{'.'.join(map(str, error.absolute_path)) or '<data>'}: {error.message}"
        for error in validator.iter_errors(data)
    ]


def _uses_database(item) -> bool:
    names = set(getattr(item, "fixturenames", ()))
    return item.get_closest_marker("django_db") is not None or bool(
        names & {"db", "transactional_db", "live_db", "_django_db_helper"}
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    outcome = yield
    if outcome.excinfo is not None or item.get_closest_marker("synthetic_events"):
        return
    if not _uses_database(item):
        return
    from django.db import connection

    from webhooks.models import Event

    if connection.in_atomic_block and connection.needs_rollback:
        return  # the test left its transaction unusable; it has said what it had to
    problems = [
        f"{event.type} {event.id}: {problem}"
        for event in Event.objects.order_by("created_at").only("id", "type", "data")
        for problem in event_problems(event.type, event.data)
    ]
    if problems:
        outcome.force_exception(
            AssertionError(
                "emitted events that do not match GET /webhook_event_types:\n"
                + "\n".join(problems[:20])
            )
        )
