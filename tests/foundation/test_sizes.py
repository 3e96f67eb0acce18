"""Sizes: no module of the apps over 400 lines, no function over 60 lines.

A longer one is allowed only with its reason written at its top: a comment line
`# Long: <reason>` as the function's first body line (before or right after its
docstring), or, for a module, between its docstring and its first statement. Migrations
are generated and not counted. Read with `ast`, so nested functions and methods count too.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
APPS = ["accounts", "billing", "config", "outreach", "plans", "webhooks"]
MODULE_MAX_LINES = 400
FUNCTION_MAX_LINES = 60
REASON = "# Long:"


def _sources() -> list[Path]:
    return [
        path
        for app in APPS
        for path in sorted((ROOT / app).rglob("*.py"))
        if "migrations" not in path.relative_to(ROOT).parts
    ]


def _has_reason(lines: list[str], first: int, last: int) -> bool:
    """Whether a `# Long:` line stands among lines[first:last] (0-based, end excluded)."""
    return any(line.strip().startswith(REASON) for line in lines[first:last])


def _docstring_end(body: list[ast.stmt]) -> int | None:
    """The last line (1-based) of the body's docstring, if it opens with one."""
    first = body[0] if body else None
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    ):
        return first.end_lineno
    return None


def _function_explained(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    body = node.body
    docstring_end = _docstring_end(body)
    # Comments between the signature and the first statement (its docstring or code).
    if _has_reason(lines, node.lineno, body[0].lineno - 1):
        return True
    if docstring_end is not None and len(body) > 1:
        after = docstring_end
        while after < len(lines) and not lines[after].strip():
            after += 1
        return lines[after].strip().startswith(REASON)
    return False


def _module_explained(lines: list[str], tree: ast.Module) -> bool:
    start = _docstring_end(tree.body) or 0
    statements = tree.body[1:] if start else tree.body
    end = statements[0].lineno - 1 if statements else len(lines)
    return _has_reason(lines, start, end)


def _offenders() -> tuple[list[str], list[str]]:
    modules, functions = [], []
    for path in _sources():
        name = str(path.relative_to(ROOT))
        source = path.read_text()
        lines = source.splitlines()
        tree = ast.parse(source, filename=name)
        if len(lines) > MODULE_MAX_LINES and not _module_explained(lines, tree):
            modules.append(f"{name} ({len(lines)} lines)")
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            size = (node.end_lineno or node.lineno) - node.lineno + 1
            if size <= FUNCTION_MAX_LINES:
                continue
            if not _function_explained(lines, node):
                functions.append(f"{name}:{node.lineno} {node.name} ({size} lines)")
    return modules, functions


def test_no_module_or_function_too_long_without_a_reason():
    modules, functions = _offenders()
    assert not modules and not functions, (
        f"modules over {MODULE_MAX_LINES} lines: {modules or 'none'}; "
        f"functions over {FUNCTION_MAX_LINES} lines without a `{REASON} <reason>` first "
        f"body line: {functions or 'none'}"
    )


def test_a_reason_is_read_where_it_is_written():
    source = '''
def documented():
    """Why it is long."""
    # Long: one table
    return 1


def bare():
    # Long: one statement
    return 1


def silent():
    """Nothing said."""
    x = 1  # Long: not at the top
    return x
'''
    lines = source.splitlines()
    functions = {
        node.name: node for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)
    }
    assert _function_explained(lines, functions["documented"])
    assert _function_explained(lines, functions["bare"])
    assert not _function_explained(lines, functions["silent"])
