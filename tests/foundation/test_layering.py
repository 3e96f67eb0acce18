"""The apps' layering: `config` imports no app, and each app imports only apps
below it. Imports are read with `ast`, at module level and inside functions alike.

    config  <  plans < accounts < billing < webhooks < outreach

plans stands alone; accounts puts an account on a plan; billing meters and bills
accounts; webhooks delivers accounts' events; outreach uses all of them. An app
below that needs something done by one above goes through a seam the upper app
registers in its AppConfig.ready (accounts' signup steps: docs/accounts.md).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
APPS = ["plans", "accounts", "billing", "webhooks", "outreach"]


def _imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


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


def test_the_reader_sees_function_level_imports(tmp_path):
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from billing import psp\n    import webhooks.models\n")
    assert _imported_packages(module) == {"billing", "webhooks"}
