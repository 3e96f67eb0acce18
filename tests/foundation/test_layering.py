"""The apps' layering: `config` imports no app, and each app imports only apps
below it. Imports are read with `ast`, at module level and inside functions alike.

    config  <  plans < accounts < billing < webhooks < outreach

plans stands alone; accounts puts an account on a plan; billing meters and bills
accounts; webhooks delivers accounts' events; outreach uses all of them. An app
below that needs something done by one above goes through a seam the upper app
registers in its AppConfig.ready (accounts' signup steps: docs/accounts.md).

Inside outreach the same rule holds between its packages and top-level modules, each
importing only those below it (docs/architecture.md, "The order inside the app"):

    models < errors < emails < bounce_types < timezones < events < analytics < admin_base
      < api_fields
      < enrollments < domains < blocklist < contacts < mailboxes < domain_cap < approvals
      < campaigns < sending < conversations < approval_decisions < intake
      < metrics < dashboard < admin < urls < management < migrations < apps

The models are the ground floor; then the modules every package may use (errors,
addresses, time zones, webhook payloads, the admin's and the API's shared pieces); then
the features, each using those below it (a campaign enrolls contacts through mailboxes;
sending reads campaigns; intake answers what was sent); then the app's assembly.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ["plans", "accounts", "billing", "webhooks", "outreach"]
OUTREACH = [
    "models",
    "errors",
    "emails",
    "bounce_types",
    "timezones",
    "events",
    "analytics",
    "admin_base",
    "api_fields",
    "enrollments",
    "domains",
    "blocklist",
    "contacts",
    "mailboxes",
    "domain_cap",
    "approvals",
    "campaigns",
    "sending",
    "conversations",
    "approval_decisions",
    "intake",
    "metrics",
    "dashboard",
    "admin",
    "urls",
    "management",
    "migrations",
    "apps",
]


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _imported_outreach_units(path: Path) -> set[str]:
    """The packages and top-level modules of outreach that `path` imports."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module == "outreach":
            names = [f"outreach.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            names = []
        found.update(name.split(".")[1] for name in names if name.startswith("outreach."))
    return found


def _outreach_unit(path: Path) -> str:
    """The package or top-level module of outreach that `path` belongs to."""
    return path.relative_to(ROOT / "outreach").with_suffix("").parts[0]


def _sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


def test_config_imports_no_app():
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) & set(APPS))
        for path in _sources("config")
    }
    assert {name: apps for name, apps in offenders.items() if apps} == {}


@pytest.mark.parametrize("app", APPS)
def test_an_app_imports_no_app_above_it(app):
    above = set(APPS[APPS.index(app) + 1 :])
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_packages(path) & above)
        for path in _sources(app)
    }
    assert {name: apps for name, apps in offenders.items() if apps} == {}


def test_every_part_of_outreach_has_its_place_in_the_order():
    parts = {_outreach_unit(path) for path in _sources("outreach")} - {"__init__"}
    assert sorted(parts - set(OUTREACH)) == []


@pytest.mark.parametrize("part", OUTREACH)
def test_a_part_of_outreach_imports_nothing_of_outreach_above_it(part):
    above = set(OUTREACH[OUTREACH.index(part) + 1 :])
    offenders = {
        str(path.relative_to(ROOT)): sorted(_imported_outreach_units(path) & above)
        for path in _sources("outreach")
        if _outreach_unit(path) == part
    }
    assert {name: parts for name, parts in offenders.items() if parts} == {}


def test_the_outreach_reader_sees_every_form_of_import(tmp_path):
    module = tmp_path / "m.py"
    module.write_text(
        "from outreach.models.sending import Enrollment\n"
        "from outreach import events\n"
        "import outreach.mailboxes.smtp\n"
        "from webhooks.events import event_emit\n"
        "def f():\n    from outreach.sending.beat import schedule_sends\n"
    )
    assert _imported_outreach_units(module) == {"models", "events", "mailboxes", "sending"}


def test_the_reader_sees_function_level_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from billing import psp\n    import webhooks.models\n")
    assert _imported_packages(module) == {"billing", "webhooks"}
