from webhooks.models import Event


def events(event_type: str | None = None) -> list[Event]:
    rows = Event.objects.order_by("created_at")
    if event_type:
        rows = rows.filter(type=event_type)
    return list(rows)
