# Two entry points: `make run` (the whole service, embedded mode) and `make test`.

# Supported Python versions, newest first (pyproject.toml's requires-python).
PYTHON_VERSIONS := 3.13 3.12 3.11
PYENV_ROOT ?= $(HOME)/.pyenv
# One interpreter per supported version that is present and runs, newest first: pythonX.Y
# on PATH, else pyenv's install of it (a pyenv shim of a version pyenv has not selected is
# on PATH but does not run, hence the trial run of each).
define find_pythons
for v in $(PYTHON_VERSIONS); do \
  for p in python$$v $(PYENV_ROOT)/versions/$$v.*/bin/python$$v; do \
    if "$$p" -c "import sys; sys.exit(sys.version[:len('$$v') + 1] != '$$v.')" 2>/dev/null; then \
      command -v "$$p"; break; \
    fi; \
  done; \
done
endef
PYTHONS := $(shell $(find_pythons))
# The interpreter of the virtual environment: the newest supported one, unless named.
PYTHON ?= $(firstword $(PYTHONS))
PYTHON_VERSION := $(shell $(PYTHON) -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)

VENV ?= .venv
BIN := $(VENV)/bin
# Named after the interpreter's version: a .venv made by another Python (or left half
# made by a failed install) has no stamp of this name, and is rebuilt.
STAMP := $(VENV)/.installed-$(PYTHON_VERSION)

# Where the embedded mode keeps its files (the settings read the same variable).
VAR_DIR ?= var
# The address `make run` serves on; unless BASE_URL is set, links in emails and the
# banner use it too.
BIND ?= 127.0.0.1:8000
# The processes `make run` starts: another Procfile runs a part of the service (or
# other programs) the same way.
PROCFILE ?= Procfile
# Test processes (pytest-xdist); each gets its own test database and Redis database.
TEST_PROCESSES ?= auto

.PHONY: run test install lint typecheck format clean pythons

# The client packages (clients/) install editable next to the service: their tests run
# in the same pytest run, against the service.
CLIENTS := clients/python clients/mcp

$(STAMP): pyproject.toml $(wildcard $(addsuffix /pyproject.toml,$(CLIENTS)))
	@case "$(PYTHON_VERSION)" in 3.11.*|3.12.*|3.13.*) ;; \
	  "") echo "No Python 3.11, 3.12 or 3.13 found. Install one, or name it: make PYTHON=/path/to/python3.13" >&2; exit 1;; \
	  *) echo "$(PYTHON) is Python $(PYTHON_VERSION); this project needs 3.11, 3.12 or 3.13 (make PYTHON=...)." >&2; exit 1;; \
	esac
	@if [ -e $(VENV) ] && [ "$$($(BIN)/python -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])' 2>/dev/null)" != "$(PYTHON_VERSION)" ]; then \
	  echo "$(VENV) was made by another Python: rebuilding it with $(PYTHON) ($(PYTHON_VERSION))"; \
	  rm -rf $(VENV); \
	fi
	rm -f $(VENV)/.installed-*
	$(PYTHON) -m venv $(VENV)
	@# uv (a wheel from the package index, into the venv) installs in seconds what pip
	@# takes a minute or two for; where it has no wheel or fails, pip does it all.
	if $(BIN)/pip install --quiet --disable-pip-version-check uv==0.13.9 && [ -x $(BIN)/uv ] && \
	  $(BIN)/uv pip install --quiet --compile-bytecode --python $(BIN)/python -e '.[test]' $(addprefix -e ,$(CLIENTS)); then \
	  :; \
	else \
	  $(BIN)/pip install --quiet --upgrade pip && \
	  $(BIN)/pip install --quiet -e '.[test]' $(addprefix -e ,$(CLIENTS)); \
	fi
	touch $@

install: $(STAMP)

# The project's own modules compiled to bytecode before a run, as the install compiles the
# libraries' (uv's --compile-bytecode; pip does it by default): with PYTHONDONTWRITEBYTECODE
# set (as on some CI machines), every process would otherwise compile every module it
# imports from source, each time: 4-6 CPU seconds for each web worker, Celery worker
# or manage.py the service and its tests start, against 1.7 with the bytecode. Quick when
# nothing changed (it compares each file's time with its bytecode's).
PY_SOURCES := $(dir $(wildcard */__init__.py)) $(CLIENTS) manage.py
BYTECODE := $(BIN)/python -m compileall -q -j 0 $(PY_SOURCES) >/dev/null

## The supported interpreters found, newest first (.ci/run tests the newest and the oldest).
pythons:
	@for p in $(PYTHONS); do echo $$p; done

## Install, migrate, and run web (granian), worker and beat together. With no
## DATABASE_URL, under the embedded PostgreSQL (config/embedded_db.py): started first
## (made on the first run, its data under $(VAR_DIR)/postgres), stopped after the rest.
## Ctrl-C stops them all; a clean stop exits 0, so make says nothing (config/procfile.py).
run: export VAR_DIR := $(VAR_DIR)
run: export BIND := $(BIND)
run: export BASE_URL := $(or $(BASE_URL),http://$(BIND))
# The banner says what is off and what the embedded mode allows: the processes need not
# say it again, each of them (config/apps.py).
run: export STARTUP_BANNER_SHOWN := 1
run: $(STAMP)
	@$(BYTECODE)
	mkdir -p $(VAR_DIR)
	$(BIN)/python -m config.embedded_db run -- sh -c '\
	  $(BIN)/python manage.py migrate --noinput && \
	  $(BIN)/python manage.py collectstatic --noinput --verbosity 0 && \
	  $(BIN)/python manage.py banner && \
	  PATH="$(CURDIR)/$(BIN):$$PATH" exec $(BIN)/python -m config.procfile start -f $(PROCFILE)'

# mypy's cache lives in the virtual environment: one per interpreter, and a rebuilt
# .venv starts afresh. What it checks is in pyproject.toml ([tool.mypy]).
MYPY := $(BIN)/mypy --cache-dir $(VENV)/.mypy_cache

## Install and run the test suite (PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set),
## after the lint and the type check.
test: $(STAMP)
	@$(BYTECODE)
	$(BIN)/ruff check .
	$(MYPY)
	$(BIN)/pytest -n $(TEST_PROCESSES) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

## Type-check the apps (mypy with the Django and DRF plugins), alone.
typecheck: $(STAMP)
	$(MYPY)

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

## Remove the virtual environment and everything the embedded mode keeps ($(VAR_DIR):
## its PostgreSQL data, the test runs' too, broker, keys and collected static files).
## A server still running on that data is stopped first.
clean:
	-@[ -x $(BIN)/python ] && [ -d $(VAR_DIR) ] && VAR_DIR=$(VAR_DIR) $(BIN)/python -c \
	  'import os, pathlib; from config import embedded_db; var = pathlib.Path(os.environ["VAR_DIR"]); \
	  [embedded_db.server_stop(var / name) for name in ("postgres", "test-postgres")]'
	rm -rf $(VENV) $(VAR_DIR)
