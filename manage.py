#!/usr/bin/env python
import os
import sys


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    from django.core.management import execute_from_command_line
    from django.db import OperationalError

    from config.startup import database_unreachable_message, settings_load_or_exit

    settings_load_or_exit("manage.py")
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
