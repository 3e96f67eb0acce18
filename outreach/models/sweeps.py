"""The state of the scheduler's sweep of suppressed contacts (outreach.sending.recovery's
`suppressed_end`, docs/sending.md "Suppressed contacts"): how far it has looked, and the
suppressed contacts it looks at again at every run."""

from django.db import models


class SweepMark(models.Model):
    """How far a sweep has looked: `at` is the wall-clock time taken at the start of its
    last look. The next look reads the rows written since `at` less its margin. No row:
    the sweep has never looked, and its next look reads everything."""

    name = models.CharField(max_length=40, primary_key=True)
    at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} at {self.at}"


class SuppressedWatch(models.Model):
    """A suppressed contact that still had an active enrollment (pending, scheduled or
    sent) when the sweep last looked: one not due yet, in flight, or waiting at a branch.
    The sweep looks at it again at every run, and forgets it once none is left.

    The contact's id, without a foreign key: a deleted contact's row is forgotten at the
    next run (it has no enrollment left), and deleting a contact writes nothing here."""

    contact_id = models.UUIDField(primary_key=True)
    # When the sweep first found it with an enrollment still to end.
    since = models.DateTimeField()

    def __str__(self) -> str:
        return f"suppressed contact {self.contact_id} watched since {self.since}"
