"""Resource ids as clients send them."""

import uuid


def is_uuid(value) -> bool:
    """Whether `value` reads as a UUID (an id that can name a resource at all)."""
    try:
        uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return False
    return True
