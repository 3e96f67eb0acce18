"""Worker lifecycle that long-running tasks look at.

`stopping` is set when the worker begins a warm shutdown (SIGTERM, Ctrl-C): a task
that runs many conversations (an SMTP batch, a webhook drain) stops starting new ones,
finishes those in flight, and gives the rest back (claims released, due at once), so
another worker takes them over without waiting for a lease to lapse.
"""

import threading

from celery.signals import worker_shutting_down

stopping = threading.Event()


@worker_shutting_down.connect
def _worker_shutting_down(**_kwargs) -> None:
    stopping.set()
