"""The Makefile's choice of interpreter, and its rebuild of a .venv made by another one.

Fake interpreters stand in for real ones (a shell script answering the Makefile's
version question, or failing like a pyenv shim of a version pyenv has not selected), so
nothing is installed.
"""

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from config import embedded_db

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")

# Answers `-c <code>` as the Makefile asks: the version check exits 0 when <code> asks
# about this script's version; the version printer prints it. `-m venv DIR` makes a
# venv of this same fake, whose pip records its calls.
FAKE = """#!/bin/sh
VERSION={version}
if [ "$1" = "-m" ] && [ "$2" = "venv" ]; then
  mkdir -p "$3/bin"
  cp "$0" "$3/bin/python"
  printf '#!/bin/sh\\necho "$@" >> "%s/pip.log"\\n' "$3" > "$3/bin/pip"
  chmod +x "$3/bin/pip"
  exit 0
fi
case "$2" in
  *"sys.version[:len('"*) case "$2" in *"'$(echo $VERSION | cut -d. -f1,2)'"*) exit 0;; *) exit 1;; esac;;
  *) echo $VERSION;;
esac
"""
BROKEN_SHIM = "#!/bin/sh\necho 'pyenv: python3.x: command not found' >&2\nexit 127\n"


def _fake(path: Path, version: str | None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(FAKE.format(version=version) if version else BROKEN_SHIM)
    path.chmod(0o755)
    return path


# The only programs on the PATH besides the fakes: no real Python can be found.
TOOLS = ("sh", "cp", "mkdir", "chmod", "cut", "rm", "touch", "cat")


def _make(*args, path_dir: Path, pyenv: Path, cwd: Path = ROOT) -> subprocess.CompletedProcess:
    tools = path_dir.parent / "tools"
    tools.mkdir(exist_ok=True)
    for tool in TOOLS:
        if not (tools / tool).exists():
            (tools / tool).symlink_to(shutil.which(tool))
    # Run under `make test PYTHON=... VENV=...` (as .ci/run does), the suite inherits
    # those variables in its environment; the make under test must not see them.
    inherited = ("PYTHON", "VENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = {
        **{key: value for key, value in os.environ.items() if key not in inherited},
        "PATH": f"{path_dir}:{tools}",
        "PYENV_ROOT": str(pyenv),
    }
    return subprocess.run(
        [shutil.which("make"), "-s", "-f", str(ROOT / "Makefile"), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_it_lists_the_supported_interpreters_newest_first(tmp_path):
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    _fake(bin_dir / "python3.11", "3.11.7")
    _fake(bin_dir / "python3.12", None)  # a pyenv shim for a version not selected
    _fake(bin_dir / "python3.13", None)
    _fake(pyenv / "versions/3.13.0/bin/python3.13", "3.13.0")
    _fake(bin_dir / "python3.10", "3.10.13")  # too old: never listed
    result = _make("pythons", path_dir=bin_dir, pyenv=pyenv)
    assert result.stdout.splitlines() == [
        str(pyenv / "versions/3.13.0/bin/python3.13"),
        str(bin_dir / "python3.11"),
    ]


def test_nothing_supported_says_so(tmp_path):
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    _fake(bin_dir / "python3.10", "3.10.13")
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    result = _make("install", f"VENV={work}/.venv", path_dir=bin_dir, pyenv=pyenv, cwd=work)
    assert result.returncode != 0
    assert "No Python 3.11, 3.12 or 3.13 found." in result.stderr


def test_an_unsupported_python_named_is_refused(tmp_path):
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    old = _fake(bin_dir / "python3.10", "3.10.13")
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    result = _make(
        "install", f"PYTHON={old}", "VENV=.venv", path_dir=bin_dir, pyenv=pyenv, cwd=work
    )
    assert result.returncode != 0
    assert f"{old} is Python 3.10.13; this project needs 3.11, 3.12 or 3.13" in result.stderr


def test_a_venv_made_by_another_python_is_rebuilt(tmp_path):
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    new = _fake(bin_dir / "python3.13", "3.13.0")
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    # A .venv left by a failed install: its python is 3.12, yet a stamp is there.
    _fake(work / ".venv/bin/python", "3.12.1")
    (work / ".venv/lib/python3.11").mkdir(parents=True)
    (work / ".venv/.installed").touch()
    result = _make("install", path_dir=bin_dir, pyenv=pyenv, cwd=work)
    assert result.returncode == 0, result.stderr
    assert f".venv was made by another Python: rebuilding it with {new} (3.13.0)" in result.stdout
    assert not (work / ".venv/lib/python3.11").exists()
    assert sorted(p.name for p in (work / ".venv").glob(".installed*")) == [".installed-3.13.0"]
    assert "install --quiet -e .[test]" in (work / ".venv/pip.log").read_text()

    # Up to date now: nothing more to do.
    again = _make("install", path_dir=bin_dir, pyenv=pyenv, cwd=work)
    assert "rebuilding" not in again.stdout
    assert (work / ".venv/pip.log").read_text().count("-e .[test]") == 1


def test_the_install_goes_through_uv_when_it_installs(tmp_path):
    """uv, taken into the venv by its pip, installs the project; pip does not."""
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    _fake(bin_dir / "python3.13", "3.13.0")
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    venv = work / ".venv"
    # A pip that installs uv: a uv recording its calls.
    pip = (
        f'#!/bin/sh\necho "$@" >> "{venv}/pip.log"\n'
        f'case "$*" in *uv==*) printf \'#!/bin/sh\\necho "$@" >> "{venv}/uv.log"\\n\' '
        f'> "{venv}/bin/uv"; chmod +x "{venv}/bin/uv";; esac\n'
    )
    _fake(venv / "bin/python", "3.13.0")
    (venv / "bin/pip").write_text(pip)
    (venv / "bin/pip").chmod(0o755)
    python = bin_dir / "python3.13"
    # Its `-m venv` keeps the venv's own pip (the fake's would replace it).
    python.write_text(
        python.read_text()
        .replace('cp "$0" "$3/bin/python"', "true")
        .replace('printf \'#!/bin/sh\\necho "$@" >> "%s/pip.log"\\n\' "$3" > "$3/bin/pip"', "true")
    )
    result = _make("install", path_dir=bin_dir, pyenv=pyenv, cwd=work)
    assert result.returncode == 0, result.stderr
    assert "uv==" in (venv / "pip.log").read_text()
    assert "-e .[test]" not in (venv / "pip.log").read_text()
    uv_call = "pip install --quiet --compile-bytecode --python .venv/bin/python -e .[test]"
    assert uv_call in (venv / "uv.log").read_text()  # the libraries' bytecode too


def test_a_venv_of_the_same_python_is_kept(tmp_path):
    bin_dir, pyenv = tmp_path / "bin", tmp_path / "pyenv"
    _fake(bin_dir / "python3.13", "3.13.0")
    work = tmp_path / "work"
    work.mkdir()
    (work / "pyproject.toml").write_text("")
    _fake(work / ".venv/bin/python", "3.13.0")
    (work / ".venv/keep").touch()
    result = _make("install", path_dir=bin_dir, pyenv=pyenv, cwd=work)
    assert result.returncode == 0, result.stderr
    assert "rebuilding" not in result.stdout
    assert (work / ".venv/keep").exists()


@pytest.mark.e2e
def test_ctrl_c_of_make_run_is_a_quiet_clean_stop(tmp_path):
    """`make run` as a person runs it (the embedded mode: PostgreSQL started, migrated,
    the banner), with a Procfile of two small processes; Ctrl-C to the terminal's
    group. make says nothing of an error; each process "stopped (rc=0)"."""
    from tests.support.embedded import embedded_env
    from tests.support.ports import free_port

    procfile = tmp_path / "Procfile"
    procfile.write_text(
        "sleeper: trap 'exit 0' TERM; while true; do sleep 0.1; done\n"
        "trapper: trap 'exit 0' TERM; echo ready; while true; do sleep 0.1; done\n"
    )
    stamp = tmp_path / "installed"  # the venv is this one: nothing to install
    stamp.touch()
    inherited = ("PYTHON", "VENV", "MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")
    env = embedded_env(tmp_path / "var", f"127.0.0.1:{free_port()}")
    env = {key: value for key, value in env.items() if key not in inherited}
    log = tmp_path / "make.log"
    venv = Path(sys.executable).parents[1]
    with log.open("wb") as out:
        make = subprocess.Popen(
            [shutil.which("make"), "run", f"VENV={venv}", f"STAMP={stamp}"]
            + [f"PROCFILE={procfile}", f"VAR_DIR={env['VAR_DIR']}", f"BIND={env['BIND']}"],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        deadline = time.monotonic() + 180
        while "trapper.1 | ready" not in log.read_text():
            assert make.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        os.killpg(make.pid, signal.SIGINT)
        make.wait(timeout=60)
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait()
        for pid in re.findall(r"started \(pid=(\d+)\)", log.read_text()):
            with contextlib.suppress(OSError):
                os.killpg(int(pid), signal.SIGKILL)
        embedded_db.server_stop(embedded_db.data_dir(tmp_path / "var"))
    text = log.read_text()
    assert "Outreach service: embedded mode (development)" in text  # the banner
    assert sorted(re.findall(r"system +\| (\w+)\.1 stopped \(rc=0\)\n", text)) == [
        "sleeper",
        "trapper",
    ]
    assert "make: ***" not in text and "Error 130" not in text
    assert (
        f"embedded_db: PostgreSQL stopped; its data stays in {embedded_db.data_dir(tmp_path / 'var')}"
        in text
    )


def test_the_project_is_compiled_to_bytecode_before_a_test_or_a_run():
    """Every package of the project (a new app too) is compiled before `make test` and
    `make run` start anything: with PYTHONDONTWRITEBYTECODE set, each process would
    compile each module it imports from source, every time."""
    packages = {path.parent.name for path in ROOT.glob("*/__init__.py")}
    for target in ("test", "run"):
        dry = subprocess.run(
            ["make", "-n", target], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout.splitlines()
        [compile_line] = [line for line in dry if "-m compileall" in line]
        compiled = set(re.findall(r"(\S+)/ ", compile_line + " "))
        assert packages <= compiled, (target, packages - compiled)
        assert "clients/python" in compile_line and "clients/mcp" in compile_line
        assert dry.index(compile_line) < min(
            i for i, line in enumerate(dry) if "pytest" in line or "procfile" in line
        )
