"""The folder the metrics' multi-process mode writes to (config/metrics.py), settled at
every process's start, before the Prometheus client library is imported (it reads
PROMETHEUS_MULTIPROC_DIR once, at its import).

- PROMETHEUS_MULTIPROC_DIR set: the operator's folder, used as it is (emptied by the
  operator before the host's processes start: README, "Production").
- Unset: a folder of the service's own, `VAR_DIR/metrics/<boot id>`, on which every
  process of the host agrees without being told. Without one shared folder each
  process would count in its own memory, and a scrape of the web would never show the
  Celery workers' counters. At each process's start:
  1. the folder is made if missing;
  2. everything else under `VAR_DIR/metrics` is removed: earlier boots' folders, whose
     processes are all gone and whose process ids others now hold;
  3. the live gauges (SMTP sessions in flight) of processes no longer running are
     removed, as the client library's `mark_process_dead` does for a process that
     exited: a worker killed outright stops counting its sessions at the next start.
  Counters of exited processes stay until the next boot: a sum across processes that
  went down would read as a counter reset to Prometheus, and every increase after it
  would be counted again.
"""

import os
import re
import shutil
from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# A value file of the client library: <kind>_<pid>.db (gauges: gauge_<mode>_<pid>.db).
_LIVE_GAUGE_FILE = re.compile(r"^gauge_live\w*?_(\d+)\.db$")


def var_dir() -> Path:
    """VAR_DIR as the settings read it (config/settings.py)."""
    return Path(os.environ.get("VAR_DIR", Path(__file__).resolve().parents[1] / "var")).resolve()


def folder_default(var: Path) -> Path:
    """`VAR_DIR/metrics/<boot id>`; where the system names no boot (not Linux), one
    folder kept across boots."""
    try:
        boot = BOOT_ID.read_text().strip()
    except OSError:
        boot = ""
    return var / "metrics" / (boot or "this-boot")


def metrics_folder_prepare(var: Path) -> Path:
    """The folder this process writes its metrics to (module docstring), in
    PROMETHEUS_MULTIPROC_DIR from now on: the processes it starts inherit it."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    if given:
        return Path(given)
    folder = folder_default(var)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ImproperlyConfigured(
            f"The metrics folder {folder} cannot be made ({exc.strerror}): make VAR_DIR "
            "writable by the service's user, or set PROMETHEUS_MULTIPROC_DIR to a folder "
            "that is (README, Production)."
        ) from None
    for other in folder.parent.iterdir():
        if other == folder:
            continue
        if other.is_dir() and not other.is_symlink():
            shutil.rmtree(other, ignore_errors=True)
        else:
            other.unlink(missing_ok=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(folder)
    _exited_processes_forget(folder)
    return folder


def _exited_processes_forget(folder: Path) -> None:
    from prometheus_client import multiprocess

    pids = {
        int(found.group(1))
        for path in folder.iterdir()
        if (found := _LIVE_GAUGE_FILE.match(path.name))
    }
    for pid in pids:
        if not _running(pid):
            multiprocess.mark_process_dead(pid, path=str(folder))


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: running
        return True
    return True
