"""The bounce classifier's cost (outreach.bounce_types): every reply of the corpus
(tests/outreach/bounce_corpus) classified, against the baseline of reading its enhanced
status code alone (the classifier's first form), in the same run.

    .venv/bin/python bench/bench_bounce_types.py [rounds]

Pure Python, no database. Prints replies per second for both and the ratio."""

import json
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from outreach.bounce_types import classify  # noqa: E402

_ENHANCED = re.compile(r"\b([245])\.(\d{1,3})\.(\d{1,3})\b")


def baseline(*, code, text):
    """The first form: the enhanced status code alone."""
    found = _ENHANCED.search(text or "")
    return ".".join(found.groups()) if found else str(code or "5")


def _texts() -> list[tuple]:
    path = Path(__file__).resolve().parents[1] / "tests/outreach/bounce_corpus/sisimai"
    replies = json.loads((path / "replies.json").read_text())
    return [(r["code"], f"{r['status']} {r['text']}".strip()) for r in replies]


def _rate(function, texts, rounds: int) -> float:
    started = time.perf_counter()
    for _ in range(rounds):
        for code, text in texts:
            function(code=code, text=text)
    return rounds * len(texts) / (time.perf_counter() - started)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    texts = _texts()
    _rate(classify, texts, 1)  # warm the compiled patterns
    base = _rate(baseline, texts, rounds)
    full = _rate(classify, texts, rounds)
    print(f"{len(texts)} replies x {rounds} rounds")
    print(f"baseline (status code alone): {base:12,.0f} replies/s")
    print(f"classify (codes and words):   {full:12,.0f} replies/s")
    print(f"ratio classify/baseline:      {full / base:.3f}")


if __name__ == "__main__":
    main()
