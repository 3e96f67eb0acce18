"""`manage.py test` would find no test (the suite is written for pytest) and say OK."""

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "The test suite runs with pytest: use `make test`."

    def add_arguments(self, parser):
        parser.add_argument("args", nargs="*")

    def handle(self, *args, **options):
        raise CommandError(
            "the test suite runs with pytest, not manage.py test: use `make test` "
            "(options through PYTEST_ARGS), or .venv/bin/pytest directly."
        )
