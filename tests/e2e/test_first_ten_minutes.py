"""The README's "First ten minutes", run as written against the service as `make run`
starts it (embedded mode), and its output compared with the README's expected output.

Only what cannot be the same here is changed: the ports (free ones, not 8000, 2525 and
8125), `var/` (the service's own directory) and `.venv/bin/python` (this interpreter).
"""

import re
import shutil
import subprocess
import sys

import pytest

from tests.support.embedded import ROOT
from tests.support.ports import free_port

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(shutil.which("curl") is None, reason="needs curl (.ci/run installs it)"),
]


def _readme_blocks() -> tuple[str, str]:
    """The section's commands for terminal 2 and its expected output."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## First ten minutes") :]
    section = section[: section.index("\n## ")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.DOTALL)
    commands = [body for kind, body in blocks if kind == "sh" and "curl" in body]
    expected = [body for kind, body in blocks if kind == "text"]
    assert len(commands) == 1 and len(expected) == 1
    return commands[0], expected[0]


def _matches(expected: str, actual: str) -> bool:
    """Line by line; `…` in an expected line stands for anything."""
    expected_lines = expected.rstrip("\n").splitlines()
    actual_lines = actual.rstrip("\n").splitlines()
    if len(expected_lines) != len(actual_lines):
        return False
    for want, got in zip(expected_lines, actual_lines, strict=True):
        pattern = ".*".join(re.escape(part) for part in want.split("…"))
        if not re.fullmatch(pattern, got):
            return False
    return True


def test_the_readmes_first_ten_minutes_work_as_written(embedded_service):
    commands, expected = _readme_blocks()
    service = embedded_service()
    sink_port, receiver_port = free_port(), free_port()
    script = (
        commands.replace("http://127.0.0.1:8000", service.url)
        .replace("2525", str(sink_port))
        .replace("8125", str(receiver_port))
        .replace("var/", f"{service.var_dir}/")
        .replace(".venv/bin/python", sys.executable)
    )
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=ROOT,
        env=service.env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert result.returncode == 0, f"{result.stdout}\n{result.stderr}\n{service.log[-3000:]}"
    assert result.stderr == ""
    assert _matches(expected, result.stdout), f"README expects:\n{expected}\ngot:\n{result.stdout}"


def test_the_comparison_is_strict():
    assert _matches("a …\nb\n", "a 1 2\nb\n")
    assert not _matches("a …\nb\n", "a 1\nb\nc\n")
    assert not _matches("a\n", "x a\n")
