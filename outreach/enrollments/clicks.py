"""A click's record (the click redirect, outreach.intake.clicks): the enrollment's first
click and the first click of the link's message (API.md 17), in one statement, which
counts the message's first click in the hour's analytics (outreach.analytics)."""

from datetime import datetime

from django.db import connection

from config.db.counters import counter_shard
from outreach.analytics import message_cte

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
    RETURNING id, account_id, enrollment_id, credential_id, step_key
),
e AS (
    UPDATE outreach_enrollment SET clicked_at = %(at)s, clicked_on = %(on)s,
        updated_at = %(at)s
    WHERE id = %(enrollment)s AND clicked_at IS NULL
    RETURNING 1
),{analytics}
SELECT (SELECT count(*) FROM e), (SELECT step_key FROM m), (
    SELECT current_key FROM outreach_enrollment
    WHERE id = %(enrollment)s AND status = 'sent' AND branch_deadline IS NOT NULL
)
""".replace("{analytics}", message_cte("clicked", source="m", at="%(at)s::timestamptz"))


def click_record(
    *, enrollment_id, step: int, variant: str, at: datetime
) -> tuple[bool, str | None, str | None]:
    """Record the click of a link of the message of position `step` (`variant`, its
    A/B letter): (whether it was the enrollment's first click, the message's step key
    when it was the message's first, the branch the enrollment waits at). A repeat is
    the one statement, changing nothing."""
    with connection.cursor() as cursor:
        cursor.execute(
            CLICK_SQL,
            {
                "at": at,
                "enrollment": enrollment_id,
                "step": step,
                "on": f"{step}{variant}",
                # The analytics rows' shard (config/db/counters.py).
                "shard": counter_shard(),
            },
        )
        first, step_key, waiting_key = cursor.fetchone()
    return bool(first), step_key, waiting_key
