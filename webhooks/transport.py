"""The HTTP session deliveries go through: config.outbound's guarded session, one per
worker process and thread.

Every connection passes the outbound guard (config/outbound.py): the host is
resolved, every address checked, and the connection made to a checked address.
"""

import os
import threading

import requests

from config.outbound import OutboundRefused, address_refusal, guarded_session, resolve_checked

# The names this module had before the guard moved to config/.
UnsafeAddress = OutboundRefused

__all__ = ["UnsafeAddress", "address_refusal", "delivery_session", "resolve_checked"]

_local = threading.local()


def delivery_session() -> requests.Session:
    """One session per worker process and thread, so keep-alive connections are
    reused across deliveries; a forked child never inherits its parent's sockets."""
    pid = os.getpid()
    if getattr(_local, "pid", None) != pid:
        _local.session = guarded_session()
        _local.pid = pid
    session: requests.Session = _local.session
    return session
