"""What the entry points (manage.py, the WSGI application, the Celery app) say when the
service cannot start: one line naming the setting or the database, not a traceback."""

import sys

from django.core.exceptions import ImproperlyConfigured


def settings_load_or_exit(program: str, status: int = 1) -> None:
    """Load the settings; a setting that is missing or wrong ends `program` with one line."""
    from django.conf import settings

    try:
        settings.INSTALLED_APPS  # noqa: B018 (the first access imports the settings module)
    except ImproperlyConfigured as exc:
        print(f"{program}: configuration error: {exc}", file=sys.stderr)
        raise SystemExit(status) from None


def database_unreachable_message(exc: Exception) -> str | None:
    """One line for a database that cannot be reached at all (connection refused, no such
    database, authentication); None for any other database error, which keeps its traceback."""
    from django.conf import settings
    from django.db import connection

    if connection.connection is not None:  # connected once: not a connection problem
        return None
    params = connection.settings_dict
    reason = " ".join(str(exc).split())
    if settings.EMBEDDED:
        return (
            f"cannot connect to the embedded database (socket in {params.get('HOST')}): "
            f"{reason} -- it runs while `make run` does (or: python -m config.embedded_db "
            "run -- <command>)"
        )
    line = f"cannot connect to the database of DATABASE_URL: {reason}"
    if "does not exist" in reason:
        # A socket directory given as ?host= (django-environ keeps it in OPTIONS).
        host = params.get("HOST") or params.get("OPTIONS", {}).get("host") or "127.0.0.1"
        port = params.get("PORT") or 5432
        user = f" -U {params['USER']}" if params.get("USER") else ""
        line += f" -- create it first: createdb -h {host} -p {port}{user} {params['NAME']}"
    return line
