"""Enrollments: every change of an enrollment's status (`transitions`) and the campaign
stats those changes keep (`stats`). Nothing else in the app writes an enrollment's
status; tests/outreach/test_enrollment_transitions.py checks it.

    pending ──dispatch──▶ scheduled ──step sent──▶ sent ──last step sent──▶ completed
       │                      │                     │ ▲                        │
       │                      └──────────┬──────────┘ └─next step sent─┘       │
       │                                 ▼                                     ▼
       │      failed (no send possible, or retries ran out)        replied (a reply)
       │      replied (a reply, when the campaign stops on reply)
       │      bounced (a bounce; or the contact bounced elsewhere)
       │      unsubscribed (the contact unsubscribed, here or elsewhere)
       └────▶ stopped (by hand, or a colleague's reply: from pending, scheduled, sent)

| Transition | Function (transitions) | Counts |
|---|---|---|
| enrolled (pending) | `enroll`, `enrollment_enroll` | enrolled |
| dispatched (scheduled) | `enrollments_schedule`, `enrollment_schedule` | |
| a step sent (sent / completed) | `after_step` and `SENT_MOVE_CTE` (in the one statement of outreach.sending.record_sql) | sent (first step), the variant's sent |
| no step left (completed) | `enrollments_complete`, `enrollments_complete_rows` (a live edit) | |
| moved by a live edit (not a status change; `sent` when it waits at a branch) | `edit_moves`: `enrollments_move_to_step`, `enrollments_wait_at_branch` | |
| failed | `enrollments_fail` | |
| replied | `enrollment_reply` | replied (and the variant answered) |
| next step held (an out-of-office notice; not a status change) | `enrollment_postpone` | |
| bounced | `enrollment_bounce` | bounced (and the variant answered) |
| unsubscribed | `enrollments_unsubscribe` | unsubscribed |
| contact suppressed elsewhere (unsubscribed / bounced) | `enrollments_suppressed_end` | unsubscribed / bounced |
| stopped | `enrollments_stop` | stopped |
| deleted (with its contact, or by staff) | `contact_delete`, `enrollments_delete` | every count taken back |
| deleted with its campaign | `campaign_delete` | (the stats go with the campaign) |

An enrollment deleted while its contact stays (by staff, or with its campaign) leaves a
tombstone (`DeletedEnrollment`) when it had sent email: the unsubscribe links in that
email still find the contact.

An open is not a change of status; it is read, then recorded, announced and counted in
one statement, `enrollment_open` (opens), which outreach.intake.services calls.
"""

from outreach.enrollments.deletions import campaign_delete, contact_delete, enrollments_delete
from outreach.enrollments.edit_moves import enrollments_move_to_step, enrollments_wait_at_branch
from outreach.enrollments.opens import enrollment_open
from outreach.enrollments.recount import stats_check, stats_recount, variant_stats_recount
from outreach.enrollments.stats import (
    ANSWERS,
    STAT_NAMES,
    STATS_SENT_CTE,
    VARIANT_SENT_CTE,
    VARIANT_STAT_NAMES,
    answer_count,
    count,
    counted,
    counting,
    stats_read,
    variant_count,
    variant_stats_read,
)
from outreach.enrollments.transitions import (
    SENT_MOVE_CTE,
    after_step,
    enroll,
    enrollment_bounce,
    enrollment_enroll,
    enrollment_postpone,
    enrollment_reply,
    enrollment_schedule,
    enrollments_complete,
    enrollments_complete_rows,
    enrollments_fail,
    enrollments_schedule,
    enrollments_stop,
    enrollments_suppressed_end,
    enrollments_unsubscribe,
)

__all__ = [
    "ANSWERS",
    "SENT_MOVE_CTE",
    "STATS_SENT_CTE",
    "STAT_NAMES",
    "VARIANT_SENT_CTE",
    "VARIANT_STAT_NAMES",
    "after_step",
    "answer_count",
    "campaign_delete",
    "contact_delete",
    "count",
    "counted",
    "counting",
    "enroll",
    "enrollment_bounce",
    "enrollment_enroll",
    "enrollment_open",
    "enrollment_postpone",
    "enrollment_reply",
    "enrollment_schedule",
    "enrollments_complete",
    "enrollments_complete_rows",
    "enrollments_delete",
    "enrollments_fail",
    "enrollments_move_to_step",
    "enrollments_schedule",
    "enrollments_stop",
    "enrollments_suppressed_end",
    "enrollments_unsubscribe",
    "enrollments_wait_at_branch",
    "stats_check",
    "stats_read",
    "stats_recount",
    "variant_count",
    "variant_stats_read",
    "variant_stats_recount",
]
