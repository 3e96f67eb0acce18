"""Analytics over time (API.md 21, docs/analytics.md): the hourly counters of
`AnalyticsHour`, kept on write by every event that moves one (`counts`), summed into
local dates by `GET /analytics` (`selectors`, `api`), their past hours' shards folded
into one row by beat (`fold`, `beat`), and rebuilt from the messages and events by
`manage.py analytics_recount` (`recount`).

It sits just above `events` in the app's order: the lowest writers (the enrollment
transitions, the open and click statements) call it; it imports only the models, the
errors, `bounce_types` and `timezones`.
"""

from outreach.analytics.counts import (
    POSITIVE_LABELS,
    SENT_CTE,
    Hit,
    bounce_counter,
    deferred,
    hits_add,
    message_cte,
)

__all__ = [
    "POSITIVE_LABELS",
    "SENT_CTE",
    "Hit",
    "bounce_counter",
    "deferred",
    "hits_add",
    "message_cte",
]
