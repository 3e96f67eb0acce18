"""The service's Prometheus metrics: the metric objects, and the one-line hooks the
engines call (docs/metrics.md says what each metric means).

Two kinds of numbers, each kept where it is cheapest (bench/README.md, "Metrics"):

- Events the database does not keep (an SMTP reply that deferred a send, how late a
  message left, an HTTP request, an IMAP poll) are counted in the process where they
  happen, with the Prometheus client library in its multi-process mode: every process
  (web workers, Celery workers, beat) writes its values to files in one folder of
  the host, and a scrape adds them up. The settings choose the folder at each start
  (`PROMETHEUS_MULTIPROC_DIR`, or the service's own under VAR_DIR:
  config/metrics_folder.py).
- State the database already holds (the due backlog, disabled mailboxes, webhook jobs
  by state, imports running, queue lengths) is read at scrape time by indexed queries
  (config/metrics_scrape.py), so it is right whichever process changed it.

Labels take only bounded values: outcomes, auth methods, route patterns, status codes,
queue names. Never an account, an address or a URL.
"""

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path

from prometheus_client import Counter, Gauge, Histogram

# Seconds; from "on time" to a day late (a send window that opens tomorrow).
LATENESS_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 7200, 21600, 86400)
# Seconds from an event to its receiver's 2xx, retries included.
WEBHOOK_LATENCY_BUCKETS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 21600)
# Seconds of one HTTP request in the web process.
# Few buckets, one label: every series is a file entry each process keeps and each
# scrape adds up (bench/README.md, "Metrics").
HTTP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10)

SEND_OUTCOMES = ("accepted", "deferred", "bounced", "failed", "unknown")
AUTH_METHODS = ("password", "oauth_google", "oauth_microsoft", "simulator")
WEBHOOK_ATTEMPT_OUTCOMES = ("succeeded", "retry", "failed")
WEBHOOK_DELIVERY_OUTCOMES = ("succeeded", "failed", "dropped")

sends = Counter(
    "outreach_sends_total",
    "Messages handed to an SMTP server, by outcome (accepted; deferred: 4xx or a broken "
    "connection, retried later; bounced: 5xx; failed: could not be sent at all; unknown: "
    "no reply to the message's end, counted as sent) and the mailbox's auth method.",
    ["outcome", "auth_method"],
)
send_lateness = Histogram(
    "outreach_send_lateness_seconds",
    "How late a message left: when it was sent minus when its step was due.",
    buckets=LATENESS_BUCKETS,
)
smtp_sessions = Gauge(
    "outreach_smtp_sessions_in_flight",
    "Mailbox batches sending now, each over one SMTP session.",
    multiprocess_mode="livesum",
)
webhook_attempts = Counter(
    "outreach_webhook_attempts_total",
    "Webhook HTTP attempts, by what they led to (succeeded: a 2xx; retry: failed, "
    "tried again later; failed: failed, no attempt left or not retryable).",
    ["outcome"],
)
webhook_deliveries = Counter(
    "outreach_webhook_deliveries_total",
    "Webhook deliveries (one event to one webhook, all its attempts) that ended, by "
    "outcome (dropped: the webhook was disabled or deleted first).",
    ["outcome"],
)
webhook_latency = Histogram(
    "outreach_webhook_delivery_latency_seconds",
    "From an event's emission to its receiver's 2xx, retries included.",
    buckets=WEBHOOK_LATENCY_BUCKETS,
)
imap_polls = Counter(
    "outreach_imap_polls_total",
    "Mailbox (IMAP) polls, by outcome (ok, error).",
    ["outcome"],
)
http_requests = Counter(
    "outreach_http_requests_total",
    "HTTP requests answered, by route pattern, method and status code.",
    ["route", "method", "status"],
)
http_duration = Histogram(
    "outreach_http_request_duration_seconds",
    "Time to answer an HTTP request, by route pattern.",
    ["route"],
    buckets=HTTP_BUCKETS,
)

# Every label value a counter can take starts at 0, so a rate over a first increment is
# right and a dashboard shows each series from the start.
for _outcome in SEND_OUTCOMES:
    for _method in AUTH_METHODS:
        sends.labels(_outcome, _method)
for _outcome in WEBHOOK_ATTEMPT_OUTCOMES:
    webhook_attempts.labels(_outcome)
for _outcome in WEBHOOK_DELIVERY_OUTCOMES:
    webhook_deliveries.labels(_outcome)
for _outcome in ("ok", "error"):
    imap_polls.labels(_outcome)


# ------------------------------------------------------------------------- the hooks


def send_observe(*, outcome: str, auth_method: str, due_at: datetime | None, now: datetime) -> None:
    """One message's outcome (outreach.sending.batch); a message that left (accepted,
    unknown) also gives its lateness, when its claim knows when it was due."""
    sends.labels(outcome, auth_method if auth_method in AUTH_METHODS else "password").inc()
    if outcome in ("accepted", "unknown") and due_at is not None:
        send_lateness.observe(max(0.0, (now - due_at).total_seconds()))


def webhook_outcomes_observe(outcomes: Iterable[tuple]) -> None:
    """The recorded outcomes of a drain's wake-up (webhooks.answers.answers_record):
    (ClaimedJob, AttemptResult | None, outcome) each."""
    for item, result, outcome in outcomes:
        if result is not None:  # a request was made
            if outcome == "dropped":  # its webhook was deleted meanwhile
                outcome_of_attempt = "succeeded" if result.ok else "failed"
            else:
                outcome_of_attempt = outcome
            webhook_attempts.labels(outcome_of_attempt).inc()
        if outcome in WEBHOOK_DELIVERY_OUTCOMES:
            webhook_deliveries.labels(outcome).inc()
        if outcome == "succeeded" and result is not None:
            emitted = item.job.event.created_at
            webhook_latency.observe(max(0.0, (result.ended_at - emitted).total_seconds()))


def imap_poll_observe(*, error: str) -> None:
    """One mailbox poll (outreach.intake.tasks); `error` empty when it worked."""
    imap_polls.labels("error" if error else "ok").inc()


# ------------------------------------------------------------ the multi-process folder


def multiprocess_dir() -> Path | None:
    """The folder every process writes its values to, or None (values in memory)."""
    value = os.environ.get("PROMETHEUS_MULTIPROC_DIR", "")
    return Path(value) if value else None


def process_exited(pid: int) -> None:
    """A process of the run ended: its live gauges (SMTP sessions in flight) stop
    counting. Its counters stay: a counter never goes down."""
    if multiprocess_dir() is not None:
        from prometheus_client import multiprocess

        multiprocess.mark_process_dead(pid)
