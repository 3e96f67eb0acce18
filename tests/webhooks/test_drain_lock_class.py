"""The drain's advisory lock class is written twice: `webhooks.sql.DRAIN_LOCK_CLASS`,
which a drain takes alone to leave (DRAIN_LEAVE_SQL), and a literal in the plpgsql
function `webhooks_drain_ring` (migration 0008), which producers take shared. A
migration cannot import app code that may change, so the literal stays; this test reads
the function as the database has it and fails when the two differ: under two classes the
producers' lock would no longer keep a drain from leaving without their jobs."""

import re

import pytest
from django.db import connection

from webhooks.sql import DRAIN_LOCK_CLASS

RING = "webhooks_drain_ring(uuid[], timestamptz, timestamptz)"
# The first argument (the class) of every advisory lock call, as a literal.
LOCK_CLASS_LITERAL = re.compile(r"pg_\w*advisory\w*\(\s*(-?\d+)\s*,")


@pytest.mark.django_db
def test_the_ring_takes_the_lock_class_of_webhooks_sql():
    with connection.cursor() as cursor:
        cursor.execute("SELECT prosrc FROM pg_proc WHERE oid = %s::regprocedure", [RING])
        (source,) = cursor.fetchone()
    classes = {int(literal) for literal in LOCK_CLASS_LITERAL.findall(source)}
    assert classes == {DRAIN_LOCK_CLASS}, (
        f"{RING} locks class {sorted(classes)}, webhooks.sql.DRAIN_LOCK_CLASS is "
        f"{DRAIN_LOCK_CLASS}: change them together (a new migration re-creating the "
        f"function with the new class)"
    )
