"""The HTTP session deliveries go through: config.outbound's guarded session, one per
worker thread, all of a process's sharing one set of connection pools.

Every connection passes the outbound guard (config/outbound.py): the host is
resolved, every address checked, and the connection made to a checked address.
Sharing the pools is what keeps connections alive across deliveries: a drain's requests
run on whichever thread of the HTTP pool is free (webhooks.delivery), and the next
request to an endpoint finds the connection the last one left open, whichever thread
made it and whichever drain.
"""

import os
import threading

import requests
from django.conf import settings

from config.outbound import (
    GuardedAdapter,
    OutboundRefused,
    address_refusal,
    guarded_adapter,
    guarded_session,
    resolve_checked,
)

# The names this module had before the guard moved to config/.
UnsafeAddress = OutboundRefused

__all__ = ["UnsafeAddress", "address_refusal", "delivery_session", "resolve_checked"]

# Endpoints (host and port) whose idle connections a worker process keeps; the least
# recently used one's are closed beyond that.
KEPT_HOSTS = 256

_local = threading.local()
_shared: dict[int, GuardedAdapter] = {}  # by process id
_shared_lock = threading.Lock()


def _process_adapter() -> GuardedAdapter:
    """The process's connection pools (a forked child makes its own: never its parent's
    sockets). Per host, as many idle connections as the process makes requests at once,
    so a burst to one host never finds its pool full."""
    pid = os.getpid()
    with _shared_lock:
        if pid not in _shared:
            _shared.clear()
            _shared[pid] = guarded_adapter(
                pool_connections=KEPT_HOSTS,
                pool_maxsize=settings.WEBHOOK_MAX_CONCURRENT_REQUESTS,
            )
        return _shared[pid]


def delivery_session() -> requests.Session:
    """This thread's session, on the process's shared connection pools."""
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.session = guarded_session(adapter=_process_adapter())
        _local.pid = pid
    session: requests.Session = _local.session
    return session
