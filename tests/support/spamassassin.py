"""SpamAssassin, the distribution's package (`apt-get install spamassassin`; .ci/run
installs it), scoring a message with its local rules only: `spamassassin -L -t`, no
network tests, no Bayes (nothing learned, nothing written), in a home of its own.

    result = spamassassin_score(message_bytes, home=tmp_path)
    result.score                # e.g. 0.0
    result.rules                # {"HTML_MESSAGE": 0.001, ...}: every rule hit, with its points

`spamassassin_path()` is the binary; a test needing it is skipped when it is missing,
and fails instead when CI is set (CI must run it).
"""

import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

_STATUS = re.compile(r"^X-Spam-Status: \w+, score=(-?\d+(?:\.\d+)?)", re.MULTILINE)
# The report's table: " pts rule name              description"
_RULE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s+([A-Z0-9_]+)\s", re.MULTILINE)


@dataclass(frozen=True)
class Scored:
    score: float
    rules: dict[str, float]

    def explain(self) -> str:
        hits = ", ".join(f"{name} {points:+.3f}" for name, points in sorted(self.rules.items()))
        return f"score {self.score} ({hits or 'no rule hit'})"


def spamassassin_path() -> str:
    found = shutil.which("spamassassin")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("spamassassin is missing in CI (.ci/run installs Debian's spamassassin)")
        pytest.skip("spamassassin not installed (apt-get install spamassassin); CI runs this")
    return found


def spamassassin_score(message: bytes, *, home: Path, binary: str | None = None) -> Scored:
    """The score of `message` and the rules it hit, with the local rules only."""
    command = [
        binary or spamassassin_path(),
        "-L",  # local tests only: no DNS blocklists, no network checks
        "-t",  # test mode: the report, whatever the threshold
        "--cf=use_bayes 0",
        "--cf=bayes_auto_learn 0",
    ]
    done = subprocess.run(
        command,
        input=message,
        capture_output=True,
        timeout=120,
        env={**os.environ, "HOME": str(home)},
        check=True,
    )
    out = done.stdout.decode("utf-8", "replace")
    status = _STATUS.search(out)
    if status is None:
        raise AssertionError(f"no X-Spam-Status in spamassassin's output: {out[:2000]}")
    report = out.split("Content analysis details:", 1)[-1]
    rules = {name: float(points) for points, name in _RULE.findall(report)}
    return Scored(score=float(status.group(1)), rules=rules)
