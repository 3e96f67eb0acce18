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


def _readme_blocks() -> list[tuple[str, str]]:
    """The section's examples: each block of commands for terminal 2 (the simulator's,
    then real SMTP's) with the expected output that follows it."""
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## First ten minutes") :]
    section = section[: section.index("\n## ")]
    blocks = re.findall(r"```(\w+)\n(.*?)```", section, flags=re.DOTALL)
    commands = [body for kind, body in blocks if kind == "sh" and "curl" in body]
    expected = [body for kind, body in blocks if kind == "text"]
    assert len(commands) == len(expected) == 2
    return list(zip(commands, expected, strict=True))


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
    service = embedded_service()
    ports = {port: str(free_port()) for port in ("2525", "8125", "8126")}
    for commands, expected in _readme_blocks():
        script = commands.replace("http://127.0.0.1:8000", service.url)
        for port, free in ports.items():
            script = script.replace(port, free)
        script = script.replace("var/", f"{service.var_dir}/").replace(
            ".venv/bin/python", sys.executable
        )
        for run in range(2):  # safe to paste twice: each run signs up a new address
            result = subprocess.run(
                ["bash", "-c", script],
                cwd=ROOT,
                env=service.env,
                capture_output=True,
                text=True,
                timeout=180,
            )
            assert result.returncode == 0, (
                f"{result.stdout}\n{result.stderr}\n{service.log[-3000:]}"
            )
            assert result.stderr == ""
            assert _matches(expected, result.stdout), (
                f"run {run + 1}: README expects:\n{expected}\ngot:\n{result.stdout}"
            )


def test_an_api_error_is_said_not_a_traceback(embedded_service):
    """`field` of the README's blocks prints the API's error, as a person reads it."""
    commands, _ = _readme_blocks()[0]
    field = commands[
        commands.index("field() {") : commands.index("\n\n", commands.index("field() {"))
    ]
    service = embedded_service()
    script = (
        f"API={service.url}\n{field}\n".replace(".venv/bin/python", sys.executable)
        + "curl -s $API/campaigns -H 'Authorization: Bearer nope' | field id"
    )
    result = subprocess.run(
        ["bash", "-c", script], cwd=ROOT, env=service.env, capture_output=True, text=True
    )
    assert result.returncode == 1
    assert result.stderr.startswith("API error invalid_api_key: ")
    assert "Traceback" not in result.stderr


def test_the_comparison_is_strict():
    assert _matches("a …\nb\n", "a 1 2\nb\n")
    assert not _matches("a …\nb\n", "a 1\nb\nc\n")
    assert not _matches("a\n", "x a\n")
