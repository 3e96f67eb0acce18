"""Idempotency-Key handling (SPEC.md section 8, API.md section 1).

`@idempotent` marks a view handler as accepting the Idempotency-Key header.
"""

import functools


def idempotent(handler):
    @functools.wraps(handler)
    def wrapper(self, request, *args, **kwargs):
        return handler(self, request, *args, **kwargs)

    wrapper.idempotent = True
    return wrapper
