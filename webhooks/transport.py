"""The connections deliveries go through: config.outbound's guarded urllib3 pools, one
set per worker process, shared by its threads.

Every connection passes the outbound guard (config/outbound.py): the host is
resolved, every address checked, and the connection made to a checked address.
Sharing the pools is what keeps connections alive across deliveries: a drain's requests
run on whichever thread of the HTTP pool is free (webhooks.delivery), and the next
request to an endpoint finds the connection the last one left open, whichever thread
made it and whichever drain. Nothing else is kept between requests (no cookie: one
account's receiver could set one for another's deliveries to the same host).
"""

import os
import threading

from django.conf import settings
from urllib3 import PoolManager

from config.outbound import OutboundRefused, address_refusal, guarded_pool_manager, resolve_checked

# The names this module had before the guard moved to config/.
UnsafeAddress = OutboundRefused

__all__ = ["UnsafeAddress", "address_refusal", "delivery_pool", "resolve_checked"]

# Endpoints (host and port) whose idle connections a worker process keeps; the least
# recently used one's are closed beyond that.
KEPT_HOSTS = 256

_pools: dict[int, PoolManager] = {}  # by process id
_pools_lock = threading.Lock()


def delivery_pool() -> PoolManager:
    """The process's connection pools (a forked child makes its own: never its parent's
    sockets). Per host, as many idle connections as the process makes requests at once,
    so a burst to one host never finds its pool full."""
    pid = os.getpid()
    with _pools_lock:
        if pid not in _pools:
            _pools.clear()
            _pools[pid] = guarded_pool_manager(
                num_pools=KEPT_HOSTS, maxsize=settings.WEBHOOK_MAX_CONCURRENT_REQUESTS
            )
        return _pools[pid]
