"""`make run`'s process manager: honcho, given the time to stop its processes cleanly.

On Ctrl-C honcho sends SIGTERM to every process and SIGKILL to those still running 5 s
later (honcho.manager.KILL_WAIT, a constant with no option). A Celery worker's warm
shutdown on the filesystem broker takes 5 to 7 s (its consumer loop wakes every 1 to 2
s), so it used to end in SIGKILL. Workaround: the same honcho with a longer wait.

    python -m config.procfile start -f Procfile

A clean stop reads as one: a process ended by the runner's own SIGTERM (Ctrl-C, or a
SIGTERM to the runner) is reported "stopped", without the rc its signal gave it, and the
runner then exits 0 (honcho exits 130 after a Ctrl-C, which make reports as
`Error 130`). A process that ends on its own, or that ends badly once asked to stop, is
reported with its rc, and the runner exits with the rc of the first to end, as honcho
does.

It also owns the run's metrics folder (PROMETHEUS_MULTIPROC_DIR, docs/metrics.md): made
empty before the processes start, so a run never adds up an earlier run's counters.
"""

import os
import re
import shutil
import signal
import sys
from pathlib import Path
from typing import Any

import honcho.command
import honcho.manager
from honcho.command import main

# Longer than any process's clean stop (gunicorn's graceful timeout is 30 s, but idle
# sync workers stop at once).
honcho.manager.KILL_WAIT = 30

# How a process asked to stop by SIGTERM ends cleanly: it exits 0, is ended by the
# signal (-15, a process without a handler), or exits 143 (a shell ended by it).
CLEAN_STOP_CODES = {0, -signal.SIGTERM, 128 + signal.SIGTERM}
# honcho's line for a process that ended (honcho.manager.Manager.loop).
_STOPPED = re.compile(r"(?P<name>\S+) stopped \(rc=(?P<rc>-?\d+)\)\n")


class Manager(honcho.manager.Manager):  # type: ignore[misc]  # honcho is untyped
    """honcho's, with a clean stop said as one. Workaround: honcho prints and keeps a
    process's end inside its loop, with no hook; its own line is rewritten here."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._asked_to_stop: set[str] = set()  # running when the runner sent SIGTERM
        self._clean_stops: set[str] = set()

    def terminate(self) -> None:
        if not self._terminating:
            self._asked_to_stop = {
                name for name, p in self._processes.items() if "returncode" not in p
            }
        super().terminate()

    def _system_print(self, data: str) -> None:
        stopped = _STOPPED.fullmatch(data)
        if (
            stopped
            and stopped["name"] in self._asked_to_stop
            and int(stopped["rc"]) in CLEAN_STOP_CODES
        ):
            self._clean_stops.add(stopped["name"])
            data = f"{stopped['name']} stopped\n"
        super()._system_print(data)

    def loop(self) -> None:
        super().loop()
        # Every process asked to stop, and each stopped cleanly: the stop began with a
        # signal to the runner (no process ended on its own first), and went well.
        if self._processes and self._clean_stops == set(self._processes):
            self.returncode = 0


# What `honcho start` (honcho.command.command_start) builds.
honcho.command.Manager = Manager


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
