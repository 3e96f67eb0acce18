"""Calls started at the same instant on threads of their own (each with its own
database connection), for races that need real row locks (PostgreSQL)."""

import threading
from collections.abc import Callable

from django.db import connections


def at_once(calls: list[Callable[[], object]]) -> None:
    """Run every call on its own thread, released together by a barrier; raise if any
    of them raised."""
    errors: list[Exception] = []
    barrier = threading.Barrier(len(calls))

    def run(call):
        try:
            barrier.wait(timeout=10)
            call()
        except Exception as exc:  # surfaced below
            errors.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert errors == []
