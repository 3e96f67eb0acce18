"""A click's record (the click redirect, outreach.intake.clicks): the enrollment's first
click and the first click of the link's message (API.md 17), in one statement. The
message's first click is counted in the hour's analytics (outreach.analytics) by the
caller, after the click's stats: the lock order of those rows
(outreach.enrollments.stats)."""

from dataclasses import dataclass
from datetime import datetime
from uuid import UUID

from django.db import connection

# The message's first click and the enrollment's, and the branch it waits at, in one
# statement: a repeat click is one UPDATE of each that matches nothing.
CLICK_SQL = """
WITH m AS (
    UPDATE outreach_message SET clicked_at = %(at)s
    WHERE id = (
        SELECT id FROM outreach_message
        WHERE enrollment_id = %(enrollment)s AND step = %(step)s
        ORDER BY sent_at DESC LIMIT 1
    ) AND clicked_at IS NULL
    RETURNING id, step_key
),
e AS (
    UPDATE outreach_enrollment SET clicked_at = %(at)s, clicked_on = %(on)s,
        updated_at = %(at)s
    WHERE id = %(enrollment)s AND clicked_at IS NULL
    RETURNING 1
)
SELECT (SELECT count(*) FROM e), (SELECT id FROM m), (SELECT step_key FROM m), (
    SELECT current_key FROM outreach_enrollment
    WHERE id = %(enrollment)s AND status = 'sent' AND branch_deadline IS NOT NULL
)
"""


@dataclass(frozen=True)
class Click:
    """What a click's statement recorded: whether it was the enrollment's first click;
    the message it was the first click of (its id and step key), if any; the branch the
    enrollment waits at."""

    first: bool
    message_id: UUID | None
    step_key: str | None
    waiting_key: str | None


def click_record(*, enrollment_id, step: int, variant: str, at: datetime) -> Click:
    """Record the click of a link of the message of position `step` (`variant`, its
    A/B letter). A repeat is the one statement, changing nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            CLICK_SQL,
            {
                "at": at,
                "enrollment": enrollment_id,
                "step": step,
                "on": f"{step}{variant}",
            },
        )
        first, message_id, step_key, waiting_key = cursor.fetchone()
    return Click(bool(first), message_id, step_key, waiting_key)
