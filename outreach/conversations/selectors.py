"""Reading conversations: the replies of an account, and the thread of an enrollment
(the steps as sent with their SMTP attempts, the replies and the responses, in time
order)."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import QuerySet

from outreach.models.branches import BranchDecision
from outreach.models.conversations import Reply, ReplyResponse
from outreach.models.sending import Enrollment, Message, SendClaim


def replies_filter(queryset: QuerySet[Reply], filters: dict[str, Any]) -> QuerySet[Reply]:
    """Replies (an account's, as the API's scoped base gives them) narrowed by the list
    filters (already validated): campaign_id, credential_id, enrollment_id, label, read,
    received_after."""
    for name in ("campaign_id", "credential_id", "enrollment_id"):
        if filters.get(name) is not None:
            queryset = queryset.filter(**{name: filters[name]})
    if filters.get("label") is not None:
        queryset = queryset.filter(label=filters["label"])
    if filters.get("read") is not None:
        queryset = queryset.filter(read=filters["read"])
    if filters.get("received_after") is not None:
        queryset = queryset.filter(received_at__gt=filters["received_after"])
    return queryset


@dataclass(frozen=True)
class ThreadEntry:
    """One entry of a thread: `kind` is `step`, `reply`, `response`, `attempt` (an
    SMTP attempt that sent nothing) or `branch` (a branch of the sequence decided,
    API.md 17); `at` orders it (a step's sent_at, a reply's received_at, a response's
    sent_at or, not sent yet, its created_at, an attempt's finished_at, a branch's
    decided_at). A step carries the attempt that sent it (`attempt`; None for a
    message sent before attempts were recorded)."""

    kind: str
    at: datetime
    item: Message | Reply | ReplyResponse | SendClaim | BranchDecision
    attempt: SendClaim | None = None


def enrollment_thread(*, enrollment: Enrollment) -> list[ThreadEntry]:
    """The conversation of one enrollment, oldest first, with the path it took through
    its sequence (each step's key, each branch decided). Five queries."""
    # With their mailboxes (each entry names the mailbox's auth_method).
    attempts = SendClaim.objects.filter(
        enrollment=enrollment, finished_at__isnull=False
    ).select_related("credential")
    sent_by_step: dict[int, SendClaim] = {}
    entries = []
    for attempt in attempts.order_by("finished_at", "pk"):
        if attempt.outcome == SendClaim.Outcome.SENT:
            sent_by_step[attempt.step] = attempt
        else:
            assert attempt.finished_at is not None  # finished ones only
            entries.append(ThreadEntry("attempt", attempt.finished_at, attempt))
    entries += [
        ThreadEntry("step", message.sent_at, message, sent_by_step.get(message.step))
        for message in Message.objects.filter(enrollment=enrollment).select_related("credential")
    ]
    entries += [
        ThreadEntry("reply", reply.received_at, reply)
        for reply in Reply.objects.filter(enrollment=enrollment).select_related("credential")
    ]
    entries += [
        ThreadEntry("response", response.sent_at or response.created_at, response)
        for response in ReplyResponse.objects.filter(enrollment=enrollment).select_related(
            "credential"
        )
    ]
    entries += [
        ThreadEntry("branch", decision.decided_at, decision)
        for decision in BranchDecision.objects.filter(enrollment=enrollment)
    ]
    # Same instant: a failed attempt, the step, a branch it decided at once, then the
    # reply to it, then the response.
    order = {"attempt": -1, "step": 0, "branch": 0.5, "reply": 1, "response": 2}
    entries.sort(key=lambda entry: (entry.at, order[entry.kind]))
    return entries
