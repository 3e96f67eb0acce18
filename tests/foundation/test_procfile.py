"""`make run`'s process runner (python -m config.procfile): a stop asked for ends with 0,
each process's end said with its own rc; a process that ends on its own first gives the
run its rc."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# Processes that stop cleanly on SIGTERM (exit 0), as the Procfile's `exec`ed ones do.
STOPPABLE = {
    "trapper": "trap 'exit 0' TERM; echo ready; while true; do sleep 0.1; done",
    "waiter": "trap 'exit 0' TERM; while true; do sleep 0.1; done",
}


class Runner:
    def __init__(
        self, directory: Path, processes: dict[str, str], wrapper: list[str], env: dict[str, str]
    ):
        procfile = directory / "Procfile"
        procfile.write_text("".join(f"{name}: {line}\n" for name, line in processes.items()))
        self.names = list(processes)
        self.log_path = directory / "runner.log"
        env = {**os.environ, "PROMETHEUS_MULTIPROC_DIR": str(directory / "metrics"), **env}
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                wrapper
                + [sys.executable, "-m", "config.procfile", "start"]
                + ["-f", str(procfile), "-d", str(directory)],
                cwd=ROOT,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    @property
    def log(self) -> str:
        return self.log_path.read_text()

    def wait_for(self, text: str, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while text not in self.log:
            assert time.monotonic() < deadline and self.process.poll() is None, self.log
            time.sleep(0.05)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(timeout=10)
        for pid in re.findall(r"started \(pid=(\d+)\)", self.log):
            with contextlib.suppress(OSError):
                os.killpg(int(pid), signal.SIGKILL)


@pytest.fixture
def runner(tmp_path):
    started: list[Runner] = []

    def start(
        processes: dict[str, str],
        wrapper: list[str] | None = None,
        env: dict[str, str] | None = None,
    ) -> Runner:
        started.append(Runner(tmp_path, processes, wrapper or [], env or {}))
        started[-1].wait_for("ready")
        for name in processes:
            started[-1].wait_for(f"{name}.1 started (pid=")
        return started[-1]

    yield start
    for each in started:
        each.stop()


def _stopped_lines(log: str) -> dict[str, str]:
    return dict(re.findall(r"system +\| (\w+)\.1 (stopped.*)", log))


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_clean_stop_says_stopped_and_exits_0(runner, signum):
    run = runner(STOPPABLE)
    # Ctrl-C: the terminal signals the foreground group (the processes are in their own).
    os.killpg(run.process.pid, signum)
    assert run.process.wait(timeout=30) == 0, run.log
    assert _stopped_lines(run.log) == {name: "stopped (rc=0)" for name in STOPPABLE}


def test_a_process_that_ends_on_its_own_is_reported_with_its_rc(runner):
    run = runner({**STOPPABLE, "crasher": "echo ready; sleep 2; exit 3"})
    # The first to end stops the others; the runner exits with its rc, as honcho does.
    assert run.process.wait(timeout=30) == 3, run.log
    assert _stopped_lines(run.log) == {
        "crasher": "stopped (rc=3)",
        **{name: "stopped (rc=0)" for name in STOPPABLE},
    }


def test_a_process_that_fails_when_asked_to_stop_says_its_rc(runner):
    run = runner({**STOPPABLE, "stubborn": "trap 'exit 1' TERM; echo ready; sleep 60 & wait"})
    os.killpg(run.process.pid, signal.SIGINT)
    # The stop was asked for (exit 0); the process's own line says how it ended.
    assert run.process.wait(timeout=30) == 0, run.log
    lines = _stopped_lines(run.log)
    assert lines.pop("stubborn") == "stopped (rc=1)"
    assert lines == {name: "stopped (rc=0)" for name in STOPPABLE}


def test_ctrl_c_under_make_runs_wrapper_with_database_url_set_is_a_clean_stop(runner):
    # make run starts the runner under config.embedded_db, which with DATABASE_URL set
    # only runs it: Ctrl-C reaches both; the wrapper waits for the runner's clean stop.
    # (Set here: the test command with nothing configured has no DATABASE_URL of its own.)
    run = runner(
        STOPPABLE,
        wrapper=[sys.executable, "-m", "config.embedded_db", "run", "--"],
        env={"DATABASE_URL": "postgres://postgres@127.0.0.1:5432/unused"},
    )
    os.killpg(run.process.pid, signal.SIGINT)
    assert run.process.wait(timeout=30) == 0, run.log
    assert _stopped_lines(run.log) == {name: "stopped (rc=0)" for name in STOPPABLE}
    assert "Traceback" not in run.log and "KeyboardInterrupt" not in run.log
