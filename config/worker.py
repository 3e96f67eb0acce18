"""Worker lifecycle that long-running tasks look at.

`stopping` is set when the worker begins a warm shutdown (SIGTERM, Ctrl-C): a task
that runs many conversations (an SMTP batch, a webhook drain) stops starting new ones,
finishes those in flight, and gives the rest back (claims released, due at once), so
another worker takes them over without waiting for a lease to lapse.
"""

import os
import threading
import warnings

from celery.exceptions import SecurityWarning
from celery.signals import celeryd_init, worker_init, worker_shutdown, worker_shutting_down

stopping = threading.Event()


def database_pool_enable() -> bool:
    """Put this process's PostgreSQL connections in a bounded pool (settings,
    DB_POOL_MAX_SIZE): for a process of many threads. Call it before threads start
    using the database; connections already open are closed first. Returns whether the
    pool is on."""
    from django.conf import settings
    from django.db import connections

    database = settings.DATABASES["default"]
    if settings.DB_POOL_MAX_SIZE <= 0 or "postgresql" not in database["ENGINE"]:
        return False
    connections.close_all()
    database["CONN_MAX_AGE"] = 0  # the pool keeps them instead
    # The project backend checks each connection the pool hands out, with no round
    # trip in the common case (config/db/postgresql); the pool's own check (which
    # CONN_HEALTH_CHECKS turns on) runs a query each time.
    database["CONN_HEALTH_CHECKS"] = False
    database.setdefault("OPTIONS", {})["pool"] = {
        "min_size": settings.DB_POOL_MIN_SIZE,
        "max_size": settings.DB_POOL_MAX_SIZE,
        "timeout": settings.DB_POOL_TIMEOUT_SECONDS,
    }
    return True


@celeryd_init.connect
def _root_said_by_the_banner(**_kwargs) -> None:
    """As root, Celery warns in every worker (celery.platforms.check_privileges, right
    after this signal). In the embedded mode under `make run` the banner says it once
    instead (plans' banner command); production keeps Celery's warning."""
    from django.conf import settings

    if settings.EMBEDDED and os.environ.get("STARTUP_BANNER_SHOWN"):
        warnings.filterwarnings(
            "ignore",
            message="You're running the worker with superuser privileges",
            category=SecurityWarning,
        )


@worker_init.connect
def _worker_init(**_kwargs) -> None:
    database_pool_enable()


@worker_shutting_down.connect
def _worker_shutting_down(**_kwargs) -> None:
    stopping.set()


@worker_shutdown.connect
def _worker_shutdown(**_kwargs) -> None:
    # Its live gauges (SMTP sessions in flight) stop counting; its counters stay.
    from config.metrics import process_exited

    process_exited(os.getpid())
