"""No import cycles between the project's own modules.

The graph is read from the source with `ast`: every `import` and `from ... import`
statement counts, at module level and inside functions alike (a lazy import that dodges
a cycle at import time is still a cycle between the two modules). An edge goes to the
module named, or to `package.name` when that name is itself a module of the project.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("accounts", "billing", "config", "outreach", "webhooks", "plans")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            found[_module_name(path)] = path
    return found


def _targets(node: ast.AST, module: str, is_package: bool, known: dict) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names if alias.name in known]
    if not isinstance(node, ast.ImportFrom):
        return []
    if node.level:
        base = module.split(".") if is_package else module.split(".")[:-1]
        base = base[: len(base) - (node.level - 1)]
        source = ".".join([*base, node.module] if node.module else base)
    else:
        source = node.module or ""
    out = []
    for alias in node.names:
        submodule = f"{source}.{alias.name}"
        if submodule in known:
            out.append(submodule)
        elif source in known:
            out.append(source)
    return out


def import_graph(packages=PACKAGES) -> dict[str, set[str]]:
    known = _modules()
    graph: dict[str, set[str]] = {}
    for module, path in known.items():
        if module.split(".")[0] not in packages:
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        edges = _edges(tree, module, path.name == "__init__.py", known)
        graph[module] = {target for target in edges if target.split(".")[0] in packages}
    return graph


def _edges(tree: ast.AST, module: str, is_package: bool, known: dict) -> set[str]:
    """The modules `tree` imports, wherever the statement sits (ast.walk)."""
    edges = set()
    for node in ast.walk(tree):
        edges.update(_targets(node, module, is_package, known))
    edges.discard(module)
    return edges


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle (its modules in order, the first repeated at the end), or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        path.append(module)
        for target in sorted(graph.get(module, ())):
            if state.get(target) == 1:
                return [*path[path.index(target) :], target]
            if target not in state:
                cycle = visit(target)
                if cycle:
                    return cycle
        path.pop()
        state[module] = 2
        return None

    for module in sorted(graph):
        if module not in state:
            cycle = visit(module)
            if cycle:
                return cycle
    return None


def test_the_project_has_no_import_cycle():
    cycle = find_cycle(import_graph(PACKAGES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_an_import_inside_a_function_is_an_edge():
    source = (
        "def run():\n    from outreach.sending import tasks\n    from outreach import enrollments\n"
    )
    edges = _edges(ast.parse(source), "outreach.example", False, _modules())
    assert edges == {"outreach.sending.tasks", "outreach.enrollments"}


def test_a_cycle_is_named():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None
