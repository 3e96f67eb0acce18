"""Changing a row that others write too: the service's update of a mailbox, a contact or
a campaign against the engine's writes to the same row.

A request reads the row, validates, then writes. Between the two, the engine writes the
same row: a send's counters and the pace's next time on a mailbox, an unsubscribe or a
bounce on a contact, a completion or an automatic pause on a campaign. A save of the
whole row as the request read it puts their older values back (a suppressed contact
mailed again, a paused campaign sending). `row_change` reads the row again under its
lock, applies the change to that fresh copy, and writes only the columns whose values
the change moved.
"""

import copy
from collections.abc import Callable
from typing import TypeVar

from django.core.exceptions import ObjectDoesNotExist
from django.db import models, transaction

Row = TypeVar("Row", bound=models.Model)


def row_change(
    instance: Row, change: Callable[[Row], None], *, missing: type[Exception] | None = None
) -> Row:
    """Apply `change` to the row of `instance` as it is now, under its lock (FOR NO KEY
    UPDATE: rows that only reference it are not held up), and write the columns it
    changed, with the model's auto_now columns. Returns the fresh copy; inside the
    caller's transaction if there is one, without a savepoint of its own: an error fails
    the caller's transaction whole (no caller goes on after a failed change, and a
    savepoint would cost every change two more round trips). A row deleted since it was
    read raises `missing()` (an API's not-found error), else ObjectDoesNotExist: a save
    would have inserted it again."""
    model = type(instance)
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    with transaction.atomic(savepoint=False):
        current = model._base_manager.select_for_update(no_key=True).filter(pk=instance.pk).first()
        if current is None:
            if missing is not None:
                raise missing()
            raise ObjectDoesNotExist(f"{model.__name__} {instance.pk} was deleted")
        # A copy: a change may replace a JSON value's contents in place.
        before = copy.deepcopy({f.attname: getattr(current, f.attname) for f in fields})
        change(current)
        changed = [name for name, value in before.items() if getattr(current, name) != value]
        if changed:
            stamps = [f.attname for f in fields if getattr(f, "auto_now", False)]
            current.save(update_fields=sorted({*changed, *stamps}))
    return current
