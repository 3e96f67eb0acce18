"""docs/accounts.md's roles table is the code's (config.api.roles): regenerate it with
`python manage.py roles_table` when this fails."""

from io import StringIO
from pathlib import Path

from django.core.management import call_command

from config.api.roles import RULES, roles_table_apply, roles_table_markdown
from config.management.commands import roles_table

DOCUMENT = Path(__file__).resolve().parents[2] / "docs" / "accounts.md"


def test_the_document_shows_the_codes_table():
    text = DOCUMENT.read_text()
    assert roles_table_apply(text) == text, "run: python manage.py roles_table"


def test_the_table_names_every_keyed_operation():
    table = roles_table_markdown()
    for operation, role in RULES.items():
        if role != "public":
            assert f"| `{operation}` | {role} |" in table


def test_the_command_rewrites_a_stale_table(tmp_path, monkeypatch):
    stale = tmp_path / "accounts.md"
    stale.write_text(DOCUMENT.read_text().replace("| `GET /api_keys` | reader |", "| x |"))
    monkeypatch.setattr(roles_table, "DOCUMENT", stale)
    out = StringIO()
    call_command("roles_table", stdout=out)
    assert "rewritten" in out.getvalue()
    assert stale.read_text() == DOCUMENT.read_text()
