"""The watch: one thread per worker process that looks, for every drain of the process
waiting for work (webhooks.delivery: a drain lingers a moment before it leaves), whether
its webhook has due jobs, and wakes the drains that do.

One query per look for all the waiting drains together (not one per drain), every
WATCH_INTERVAL_SECONDS while any drain waits; the thread ends when none does and starts
again with the next. What the watch sees is a hint, never a promise: a drain woken finds
its jobs through its own claim, and a drain the watch misses (the thread failed, the
database was away) just waits out its linger and leaves the usual way, which never
strands a job (webhooks.delivery, "leaving").
"""

import contextlib
import logging
import threading
import time
from concurrent.futures import Future, InvalidStateError
from datetime import datetime

from django.db import connection
from django.utils import timezone

from config.db import connection_release

logger = logging.getLogger(__name__)

WATCH_INTERVAL_SECONDS = 0.02  # how soon a waiting drain sees a new job, at most
WATCH_ERROR_PAUSE_SECONDS = 1.0  # after a failed look (the database away)

# The due jobs of the waiting drains' webhooks (deliveryjob_webhook_due_idx).
DUE_WEBHOOKS_SQL = (
    "SELECT DISTINCT webhook_id FROM webhooks_deliveryjob"
    " WHERE webhook_id = ANY(%s) AND state IN ('pending', 'delivering')"
    " AND next_attempt_at <= %s"
)


def webhooks_with_due_jobs(webhook_ids: list[str], *, now: datetime) -> set[str]:
    with connection.cursor() as cursor:
        cursor.execute(DUE_WEBHOOKS_SQL, [webhook_ids, now])
        return {str(row[0]) for row in cursor.fetchall()}


class Watch:
    """Drains register a Future to be woken (`watch`), and cancel it when they stop
    waiting; the watch sets the Future's result when the webhook has due jobs, and
    forgets the Futures done (set or cancelled) at its next look. A Future, so a drain
    can wait for it together with its requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, set[Future]] = {}
        self._thread: threading.Thread | None = None

    def watch(self, webhook_id) -> Future:
        wake: Future = Future()
        with self._lock:
            self._waiting.setdefault(str(webhook_id), set()).add(wake)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="webhook-watch", daemon=True)
                self._thread.start()
        return wake

    def _run(self) -> None:
        try:
            while self._look():
                pass
        finally:
            connection.close()
            with self._lock:
                if self._thread is threading.current_thread():
                    self._thread = None  # the next watch() starts a new one

    def _look(self) -> bool:
        """One look for every waiting drain; False when none waits (the thread ends)."""
        with self._lock:
            # Forget the drains woken already or no longer waiting (their Future cancelled).
            for pk, wakes in list(self._waiting.items()):
                waiting = {wake for wake in wakes if not wake.done()}
                if waiting:
                    self._waiting[pk] = waiting
                else:
                    del self._waiting[pk]
            webhook_ids = list(self._waiting)
            if not webhook_ids:
                self._thread = None
                return False
        try:
            due = webhooks_with_due_jobs(webhook_ids, now=timezone.now())
        except Exception:
            logger.warning("webhook watch: could not look for due jobs", exc_info=True)
            due, pause = set(), WATCH_ERROR_PAUSE_SECONDS
        else:
            pause = WATCH_INTERVAL_SECONDS
        finally:
            connection_release()
        self._wake(due)
        time.sleep(pause)
        return True

    def _wake(self, webhook_ids: set[str]) -> None:
        with self._lock:
            wakes = [wake for pk in webhook_ids for wake in self._waiting.get(pk, ())]
        for wake in wakes:
            # Set meanwhile by another look (InvalidStateError): awake already.
            with contextlib.suppress(InvalidStateError):
                wake.set_result(True)


watch = Watch()
