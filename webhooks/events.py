"""The one way producers emit webhook events.

    from webhooks.events import emit
    emit(account, "enrollment.sent", {...})   # inside the state change's transaction

`emit(account, event_type, data) -> Event` (account: an Account or its id; data:
a JSON-serialisable dict, datetimes/UUIDs/Decimals allowed) is
`webhooks.services.event_emit(*, account, event_type, data)`. It raises
ValueError for an event type outside EVENT_TYPES.
"""

from webhooks.models import EVENT_TYPES
from webhooks.services import event_emit


def emit(account, event_type: str, data: dict):
    return event_emit(account=account, event_type=event_type, data=data)


__all__ = ["EVENT_TYPES", "emit"]
