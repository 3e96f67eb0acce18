"""The scan behind the one-owner tests of a model's status: which lines of the app write
it. A status has one owner module; its test fails on a write found anywhere else."""

import ast
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRITES = {"update", "create", "get_or_create", "update_or_create", "bulk_create", "save"}


@dataclass(frozen=True)
class StatusScan:
    """What a write of `model`'s status looks like: one of `fields` given a value named
    `model.<enum>.X` (an enum of `enums`), a keyword of `any_value` passed to a write
    whatever its value (unless through another model class's manager), or SQL that
    updates `table`."""

    model: str
    table: str
    fields: frozenset[str] = frozenset({"status"})
    enums: frozenset[str] = frozenset({"Status"})
    any_value: frozenset[str] = field(default_factory=frozenset)

    def _names_a_status(self, node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Attribute)
            and node.value.attr in self.enums
            and isinstance(node.value.value, ast.Name)
            and node.value.value.id == self.model
        )

    def _another_models(self, node: ast.Call) -> bool:
        """A write through another model class's manager (`SmtpCredential.objects...
        .update(paused_reason=...)`): that model's field of the same name, not this one's."""
        root = node.func
        while isinstance(root, ast.Attribute | ast.Call):
            root = root.value if isinstance(root, ast.Attribute) else root.func
        return isinstance(root, ast.Name) and root.id[:1].isupper() and root.id != self.model

    def _call_writes(self, node: ast.Call) -> bool:
        name = getattr(node.func, "attr", getattr(node.func, "id", ""))
        if name not in WRITES and name != self.model or self._another_models(node):
            return False
        return any(
            keyword.arg in self.any_value
            or (keyword.arg in self.fields and self._names_a_status(keyword.value))
            for keyword in node.keywords
        )

    def lines(self, source: str) -> list[int]:
        """Lines of `source` that write the status: `x.status = Model.Status...`,
        `"status": Model.Status...` in a dict, `status=Model.Status...` passed to a
        write (update, create, save, ...), or SQL that updates the table."""
        found = []
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Assign):
                if any(
                    isinstance(t, ast.Attribute) and t.attr in self.fields for t in node.targets
                ) and self._names_a_status(node.value):
                    found.append(node.lineno)
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values, strict=True):
                    is_status = isinstance(key, ast.Constant) and key.value in self.fields
                    if is_status and self._names_a_status(value):
                        found.append(node.lineno)
            elif (
                isinstance(node, ast.Call)
                and self._call_writes(node)
                or isinstance(node, ast.Constant)
                and f"UPDATE {self.table} " in str(node.value)
            ):
                found.append(node.lineno)
        return found

    def outside(self, owners: tuple[str, ...]) -> dict[str, list[int]]:
        """The writes in outreach/ outside the `owners` (paths under outreach/, a module
        or a package) and the migrations, by file."""
        found = {}
        for path in sorted((ROOT / "outreach").rglob("*.py")):
            relative = path.relative_to(ROOT)
            inside = relative.relative_to("outreach").as_posix()
            if inside.startswith(("migrations/", *owners)):
                continue
            lines = self.lines(path.read_text())
            if lines:
                found[str(relative)] = lines
        return found
