"""`make run`'s process manager: honcho, given the time to stop its processes cleanly.

On Ctrl-C honcho sends SIGTERM to every process and SIGKILL to those still running 5 s
later (honcho.manager.KILL_WAIT, a constant with no option). A Celery worker's warm
shutdown on the filesystem broker takes 5 to 7 s (its consumer loop wakes every 1 to 2
s), so it used to end in SIGKILL. Workaround: the same honcho with a longer wait.

    python -m config.procfile start -f Procfile

A stop asked for is a clean end: honcho exits 130 after a Ctrl-C (143 after a SIGTERM
to it), which make reports as `Error 130`; the runner exits 0 then. Each process's own
end is still said on honcho's `stopped (rc=N)` line (the Procfile `exec`s every
process, so it is the process's own status: 0 for a clean stop). A process that ends
on its own first stops the others, and its rc is the runner's, as honcho does.

It also owns the run's metrics folder (PROMETHEUS_MULTIPROC_DIR, docs/metrics.md): made
empty before the processes start, so a run never adds up an earlier run's counters.
"""

import os
import shutil
import signal
import sys
from pathlib import Path

import honcho.manager
from honcho.command import main

from config.metrics_folder import folder_default, var_dir

# Longer than any process's clean stop (the web's graceful stop gives requests 30 s, but idle
# workers stop at once).
honcho.manager.KILL_WAIT = 30

# honcho's exit status for a run it stopped on a signal to itself (set before it stops
# its processes): Ctrl-C or a SIGTERM to the runner.
SIGNAL_STOPS = {128 + signal.SIGINT, 128 + signal.SIGTERM}


def multiprocess_dir_reset(path: Path) -> None:
    """Empty (or make) the metrics folder before the processes of a run start: values
    of an earlier run must not be added to this one's. (Here, not in config.metrics:
    importing the metrics would make this process write files of its own.)"""
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)


def metrics_dir_prepare() -> None:
    """This run's multi-process metrics folder (config/metrics_folder.py), emptied before
    any process starts: PROMETHEUS_MULTIPROC_DIR, or the service's own under VAR_DIR
    when unset. Every process honcho starts inherits it."""
    folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR") or str(folder_default(var_dir()))
    multiprocess_dir_reset(Path(folder))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = folder


def run(argv: list[str] | None = None) -> int | str | None:
    """honcho's `main` after the metrics folder is prepared; a stop asked for is 0."""
    metrics_dir_prepare()
    try:
        main(argv)
    except SystemExit as stopped:
        return 0 if stopped.code in SIGNAL_STOPS else stopped.code
    return 0


if __name__ == "__main__":
    sys.exit(run())
