"""An enrollment's first open, recorded and counted in one statement (intake's open
pixel calls it): the enrollment's opened_at, what the open answered, and its campaign's
counts (outreach.enrollments.stats)."""

from django.db import connection

from config.db.prepared import prepared
from outreach.enrollments.stats import answer_split, count, variant_count
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment

# An open recorded (enrollment_open): the enrollment's opened_at, and what the open
# answered (`answered`, in SQL: its last step sent and that step's variant, "A" unless
# the enrollment's variants say otherwise); the enrollment as the event needs it, with its
# contact's email and its campaign's account. _OPEN_FIELDS: what OPEN_SQL returns, in order.
_OPEN_FIELDS = (
    "id",
    "campaign_id",
    "contact_id",
    "status",
    "current_step",
    "sent_at",
    "replied_at",
    "bounce_reason",
    "opened_at",
    "opened_on",
)
OPEN_SQL = prepared("""
WITH opened AS (
    UPDATE outreach_enrollment AS e
    SET opened_at = %(at)s, updated_at = %(at)s,
        opened_on = CASE WHEN e.current_step > 0
            THEN e.current_step::text || COALESCE(e.variants ->> e.current_step::text, 'A')
            ELSE e.opened_on END
    WHERE e.id = %(enrollment)s AND e.opened_at IS NULL
    RETURNING e.id, e.campaign_id, e.contact_id, e.status, e.current_step, e.sent_at,
        e.replied_at, e.bounce_reason, e.opened_at, e.opened_on
)
SELECT o.*, c.email, k.account_id
FROM opened AS o
JOIN outreach_contact AS c ON c.id = o.contact_id
JOIN outreach_campaign AS k ON k.id = o.campaign_id
""")


def enrollment_open(*, enrollment_id, at) -> Enrollment | None:
    """Record an enrollment's first open and count what it answered (answer_count's
    work), in one statement: the enrollment (its other fields loaded when read, its
    contact's email and its campaign's account_id loaded), or None when it was opened
    before, or is gone. Call it inside `counting()`, in the caller's transaction."""
    with connection.cursor() as cursor:
        cursor.execute(OPEN_SQL, {"enrollment": enrollment_id, "at": at})
        row = cursor.fetchone()
    if row is None:
        return None
    values = dict(zip(_OPEN_FIELDS, row, strict=False))
    email, account_id = row[len(_OPEN_FIELDS) :]
    enrollment = _loaded(Enrollment, values)
    enrollment.contact = _loaded(Contact, {"id": values["contact_id"], "email": email})
    enrollment.campaign = _loaded(Campaign, {"id": values["campaign_id"], "account_id": account_id})
    count(enrollment.campaign_id, opened=1)
    if enrollment.opened_on:
        step, letter = answer_split(enrollment.opened_on)
        variant_count(enrollment.campaign_id, step, letter, opened=1)
    return enrollment


def _loaded(model, values: dict):
    """An instance of `model` as a query of these fields (attribute names) loads it: the
    others are read from the database when first used."""
    names = [f.attname for f in model._meta.concrete_fields if f.attname in values]
    return model.from_db(connection.alias, names, [values[name] for name in names])
