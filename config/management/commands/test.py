"""`manage.py test` would find no test (the suite is written for pytest) and say OK."""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser


class Command(BaseCommand):
    help = "The test suite runs with pytest: use `make test`."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("args", nargs="*")

    def handle(self, *args: Any, **options: Any) -> None:
        raise CommandError(
            "the test suite runs with pytest, not manage.py test: use `make test` "
            "(options through PYTEST_ARGS), or .venv/bin/pytest directly."
        )
