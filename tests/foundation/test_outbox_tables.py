"""The outbox is webhooks' own: no module outside webhooks/ names one of its tables.

A producer writes an event through webhooks (webhooks.events.event_emit, or the
fragment and parameters of webhooks.sql spliced into its own statement); it never
writes SQL against the outbox itself, so the event's write cannot drift from
event_emit's. The tables are those of webhooks' models, read from the models.

Searched: the apps, config, the clients and manage.py. Not the tests and benchmarks,
which set up and count the rows they measure.
"""

import re
from pathlib import Path

from django.apps import apps

ROOT = Path(__file__).resolve().parents[2]
SEARCHED = ["accounts", "billing", "config", "outreach", "plans", "clients", "manage.py"]
SKIPPED = {"node_modules", ".venv", "__pycache__"}
SUFFIXES = {".py", ".sql", ".md", ".html", ".txt"}


def _outbox_tables() -> set[str]:
    return {
        model._meta.db_table
        for model in apps.get_app_config("webhooks").get_models(include_auto_created=True)
    }


def _naming(tables: set[str]) -> re.Pattern:
    names = "|".join(sorted(map(re.escape, tables)))
    return re.compile(rf"(?<![A-Za-z0-9_])({names})(?![A-Za-z0-9_])")


def _files(*places: str):
    for place in places:
        path = ROOT / place
        found = [path] if path.is_file() else path.rglob("*")
        for file in found:
            if file.suffix in SUFFIXES and not SKIPPED & set(file.parts) and file.is_file():
                yield file


def _named(pattern: re.Pattern, files) -> dict[str, list[str]]:
    named: dict[str, list[str]] = {}
    for file in files:
        where = file.relative_to(ROOT) if file.is_relative_to(ROOT) else file.name
        for number, line in enumerate(file.read_text(errors="replace").splitlines(), 1):
            for table in pattern.findall(line):
                named.setdefault(table, []).append(f"{where}:{number}")
    return named


def test_no_module_outside_webhooks_names_an_outbox_table():
    named = _named(_naming(_outbox_tables()), _files(*SEARCHED))
    assert named == {}, "write the outbox through webhooks (webhooks.events, webhooks.sql)"


def test_the_search_finds_the_tables_where_webhooks_names_them():
    tables = _outbox_tables()
    assert {"webhooks_event", "webhooks_deliveryjob"} <= tables
    # webhooks' own SQL names every one of them: the search would see them elsewhere.
    assert set(_named(_naming(tables), _files("webhooks"))) == tables


def test_the_search_tells_a_table_from_a_longer_name(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        'SQL = "SELECT 1 FROM webhooks_event"\n'
        'URL = "admin:webhooks_webhook_changelist"\n'
        'RING = "webhooks_drain_ring(ids)"\n'
    )
    named = _named(_naming({"webhooks_event", "webhooks_webhook"}), [module])
    assert named == {"webhooks_event": ["m.py:1"]}
