"""`make run`'s process manager: honcho, given the time to stop its processes cleanly.

On Ctrl-C honcho sends SIGTERM to every process and SIGKILL to those still running 5 s
later (honcho.manager.KILL_WAIT, a constant with no option). A Celery worker's warm
shutdown on the filesystem broker takes 5 to 7 s (its consumer loop wakes every 1 to 2
s), so it used to end in SIGKILL. Workaround: the same honcho with a longer wait.

    python -m config.procfile start -f Procfile

It also owns the run's metrics folder (PROMETHEUS_MULTIPROC_DIR, docs/metrics.md): made
empty before the processes start, so a run never adds up an earlier run's counters.
"""

import os
import shutil
import sys
from pathlib import Path

import honcho.manager
from honcho.command import main

# Longer than any process's clean stop (gunicorn's graceful timeout is 30 s, but idle
# sync workers stop at once).
honcho.manager.KILL_WAIT = 30


def multiprocess_dir_reset(path: Path) -> None:
    """Empty (or make) the metrics folder before the processes of a run start: values
    of an earlier run must not be added to this one's. (Here, not in config.metrics:
    importing the metrics would make this process write files of its own.)"""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def metrics_dir_prepare() -> None:
    """This run's multi-process metrics folder (config/metrics.py), emptied before any
    process starts: PROMETHEUS_MULTIPROC_DIR, or VAR_DIR/metrics when unset. Every
    process honcho starts inherits it."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(
        Path(os.environ.get("VAR_DIR", "var")).resolve() / "metrics"
    )
    multiprocess_dir_reset(Path(folder))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder


if __name__ == "__main__":
    metrics_dir_prepare()
    sys.exit(main())
