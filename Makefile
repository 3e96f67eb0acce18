# Two entry points: `make run` (the whole service, embedded mode) and `make test`.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
# Test processes (pytest-xdist); each gets its own test database and Redis database.
TEST_PROCESSES ?= auto

.PHONY: run test install lint format bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP)

## Install, migrate, and run web (gunicorn), worker and beat together.
run: $(STAMP)
	mkdir -p var
	$(BIN)/python manage.py migrate --noinput
	$(BIN)/python manage.py collectstatic --noinput --verbosity 0
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/honcho start -f Procfile

## Install and run the test suite (PostgreSQL/Redis when DATABASE_URL/REDIS_URL are set).
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/pytest -n $(TEST_PROCESSES) $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

clean:
	rm -rf $(VENV) var staticfiles
