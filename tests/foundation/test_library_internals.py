"""Library code stays the library's: no module of the service changes a library from
outside. Read with `ast`, every module of the service (its apps, config, bench and
manage.py; not the tests, whose patches end with the test) is searched for:

- an assignment (`=`, `+=`, `del`, `setattr`) to an attribute of something imported
  from a library (a module, a class, an object: `honcho.manager.KILL_WAIT = 30`), or to
  a private one (`_name`) of anything reached from an import or from what a library
  call returned in the same function (`conn = kombu.Connection(...); conn._x = 1`);
- a class deriving from a library class that defines a name the base class has and
  that is private (`_write_headers` in a subclass of `email.generator.Generator`):
  overriding what the library may rename or drop in any release.

A library is any top-level module that is not the service's own (the standard library
included: `email`, `smtplib`). What must stay is in ALLOWED, each with why; an entry
that no longer matches fails too, so the list only shrinks.
"""

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FIRST_PARTY = {"accounts", "billing", "config", "outreach", "plans", "webhooks", "bench", "tests"}
SKIPPED = {".venv", "tests", "clients", "node_modules", "var", "migrations"}

# (module, what) -> why it stays.
ALLOWED: dict[tuple[str, str], str] = {
    ("config/procfile.py", "honcho.manager.KILL_WAIT"): (
        "honcho has no option for its wait before SIGKILL (5 s); a Celery worker's warm "
        "stop on the filesystem broker takes 5-7 s"
    ),
    ("config/broker.py", "overrides kombu.transport.filesystem.Channel._put"): (
        "kombu's filesystem transport creates a message file, then writes it: a consumer "
        "can read it empty; no public hook for the write (the broker of make run only)"
    ),
    ("config/outbound.py", "overrides smtplib.SMTP._get_socket"): (
        "the outbound guard connects to the address it checked; smtplib's one seam for the "
        "connect (its own SMTP_SSL and LMTP override it)"
    ),
    ("config/outbound.py", "overrides imaplib.IMAP4._create_socket"): (
        "the outbound guard connects to the address it checked; imaplib's one seam for the "
        "connect (its own IMAP4_SSL overrides it)"
    ),
    ("config/outbound.py", "overrides imaplib.IMAP4_SSL._create_socket"): (
        "as IMAP4's, with the TLS wrap IMAP4_SSL's own does"
    ),
    ("outreach/sending/mime.py", "overrides email.generator.BytesGenerator._make_boundary"): (
        "the custom MIME writer (docs/development.md, what stays and its figure)"
    ),
    ("outreach/sending/mime.py", "overrides email.policy.EmailPolicy._fold"): (
        "the custom MIME writer (docs/development.md, what stays and its figure)"
    ),
}


def _modules() -> Iterator[Path]:
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT).parts
        if not SKIPPED.intersection(parts) and not any(p.startswith(".") for p in parts):
            yield path


def _imports(tree: ast.Module) -> dict[str, str]:
    """Names bound by an import of a library anywhere in the module: name -> dotted path."""
    bound: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] not in FIRST_PARTY:
                    name = alias.asname or alias.name.split(".")[0]
                    bound[name] = alias.name if alias.asname else name
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and node.module.split(".")[0] not in FIRST_PARTY
        ):
            for alias in node.names:
                bound[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    return bound


def _chain(node: ast.expr) -> tuple[str, list[str]] | None:
    """`a.b.c` as ("a", ["b", "c"]); None for anything else."""
    attrs: list[str] = []
    while isinstance(node, ast.Attribute):
        attrs.insert(0, node.attr)
        node = node.value
    while isinstance(node, ast.Call):  # a.b().c: what a call of the chain returned
        node = node.func
        while isinstance(node, ast.Attribute):
            attrs.insert(0, node.attr)
            node = node.value
    return (node.id, attrs) if isinstance(node, ast.Name) else None


def _from_library(value: ast.expr, bound: dict[str, str], derived: dict[str, str]) -> str | None:
    """The dotted path of a library value (`smtplib.SMTP` for `smtplib.SMTP(host)`)."""
    chain = _chain(value)
    if chain is None or (chain[0] not in bound and chain[0] not in derived):
        return None
    return ".".join([bound.get(chain[0]) or derived[chain[0]], *chain[1]])


def _resolve(dotted: str) -> object:
    """The object a dotted path names (None when it cannot be imported)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        try:
            found: object = importlib.import_module(".".join(parts[:end]))
        except ImportError:
            continue
        for part in parts[end:]:
            found = getattr(found, part, None)
        return found
    return None


def _changed(root: str, attrs: list[str], bound: dict[str, str], derived: dict[str, str]):
    """The library attribute `root.attrs...` is, when assigning to it changes a library:
    a private one, or any of a module or a class (an object's public attributes are its
    own to set: `admin.site.site_header`)."""
    if root not in bound and root not in derived:
        return None
    dotted = ".".join([bound.get(root) or derived[root], *attrs])
    if any(a.startswith("_") for a in attrs):
        return dotted
    if root in bound and isinstance(_resolve(dotted.rpartition(".")[0]), type | ModuleType):
        return dotted
    return None


def _target_hit(target: ast.expr, bound: dict[str, str], derived: dict[str, str]) -> str | None:
    """What assigning to `target` changes of a library, or None."""
    if not isinstance(target, ast.Attribute):
        return None
    chain = _chain(target)
    return None if chain is None else _changed(*chain, bound, derived)


def _setattr_hit(call: ast.Call, bound: dict[str, str], derived: dict[str, str]) -> str | None:
    """`setattr(obj, "name", v)` / `monkeypatch.setattr(obj, "name", v)` on a library."""
    func = call.func
    name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
    if name != "setattr" or len(call.args) < 2:
        return None
    obj, attr = call.args[0], call.args[1]
    if not (isinstance(attr, ast.Constant) and isinstance(attr.value, str)):
        return None
    chain = _chain(obj)
    return None if chain is None else _changed(chain[0], [*chain[1], attr.value], bound, derived)


def _override_hits(node: ast.ClassDef, bound: dict[str, str]) -> Iterator[str]:
    """Private names of a library base class this class defines again."""
    bases = []
    for base in node.bases:
        chain = _chain(base)
        if chain and chain[0] in bound:
            found = _resolve(".".join([bound[chain[0]], *chain[1]]))
            if isinstance(found, type):
                bases.append(found)
    for item in node.body:
        names = []
        if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef):
            names = [item.name]
        elif isinstance(item, ast.Assign):
            names = [t.id for t in item.targets if isinstance(t, ast.Name)]
        for name in names:
            private = name.startswith("_") and not name.endswith("__")
            for base in bases:
                if private and hasattr(base, name):
                    yield f"{base.__module__}.{base.__qualname__}.{name}"


def _scope_hits(scope: ast.AST, bound: dict[str, str]) -> Iterator[str]:
    """Assignments to a library in one function (or the module's own statements)."""
    derived: dict[str, str] = {}
    for node in ast.walk(scope):
        if node is not scope and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            continue  # its own scope, walked on its own (names it binds leak: harmless)
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if (source := _from_library(node.value, bound, derived)) is not None:
                derived |= {t.id: source for t in targets if isinstance(t, ast.Name)}
            for target in targets:
                if (hit := _target_hit(target, bound, derived)) is not None:
                    yield hit
        elif isinstance(node, ast.AugAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Delete) else [node.target]
            for target in targets:
                if (hit := _target_hit(target, bound, derived)) is not None:
                    yield hit
        elif isinstance(node, ast.Call) and (hit := _setattr_hit(node, bound, derived)):
            yield hit


def _hits(path: Path) -> set[tuple[str, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    bound = _imports(tree)
    module = str(path.relative_to(ROOT))
    found = set()
    scopes = [tree] + [
        n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
    ]
    for scope in scopes:
        found |= {(module, hit) for hit in _scope_hits(scope, bound)}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found |= {(module, f"overrides {hit}") for hit in _override_hits(node, bound)}
    return found


def test_no_module_changes_a_library_from_outside():
    hits = set()
    for path in _modules():
        hits |= _hits(path)
    assert sorted(hits - set(ALLOWED)) == [], "changes a library's internals"
    assert sorted(set(ALLOWED) - hits) == [], "allowed, but no longer there: drop it"


def _hits_of(source: str) -> set[str]:
    tree = ast.parse(source)
    bound = _imports(tree)
    found = set()
    for scope in [tree] + [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]:
        found |= set(_scope_hits(scope, bound))
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            found |= {f"overrides {hit}" for hit in _override_hits(node, bound)}
    return found


def test_the_search_finds_each_kind_of_change():
    assert _hits_of("import honcho.manager\nhoncho.manager.KILL_WAIT = 30") == {
        "honcho.manager.KILL_WAIT"
    }
    assert _hits_of("from kombu.transport import redis as r\nr.Channel._x += 1") == {
        "kombu.transport.redis.Channel._x"
    }
    assert _hits_of("import email.policy as p\nsetattr(p, 'linesep', '')") == {
        "email.policy.linesep"
    }
    assert _hits_of("import smtplib\ndef f():\n    s = smtplib.SMTP()\n    s._host = 1") == {
        "smtplib.SMTP._host"
    }
    source = "from email.generator import Generator\nclass G(Generator):\n    def _write_headers(self, m): pass"
    assert _hits_of(source) == {"overrides email.generator.Generator._write_headers"}


def test_the_search_leaves_the_services_own_code_alone():
    # Public use of a library, the service's own objects, a library call's public result.
    source = """
import logging
from config.celery import app
app.conf.task_always_eager = True
class F(logging.Filter):
    def filter(self, record):
        record.request_id = "x"
        return True
def f(handler):
    log = logging.getLogger("a")
    log.level = 10
    self_made = object()
    self_made._x = 1
"""
    assert _hits_of(source) == set()
