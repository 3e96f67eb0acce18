#!/usr/bin/env python
import contextlib
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.conf import settings
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from config import embedded_db
    from config.startup import database_unreachable_message, settings_load_or_exit

    settings_load_or_exit("manage.py")
    with contextlib.ExitStack() as stack:
        if settings.EMBEDDED:
            # The embedded mode's PostgreSQL, started for this command if it is not
            # running (and stopped after it); `make run` keeps it up while it runs.
            data = settings.EMBEDDED_DATABASE_DIR
            try:
                stack.enter_context(embedded_db.server(data))
            except embedded_db.EmbeddedDatabaseError as exc:
                print(f"manage.py: {exc}", file=sys.stderr)
                raise SystemExit(1) from None
            embedded_db.settings_refresh(settings.DATABASES["default"], data)
        try:
            execute_from_command_line(sys.argv)
        except OperationalError as exc:
            message = database_unreachable_message(exc)
            if message is None:
                raise
            print(f"manage.py: {message}", file=sys.stderr)
            raise SystemExit(1) from None


if __name__ == "__main__":
    main()
