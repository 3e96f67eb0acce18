"""Changing conversations from the API: a reply's read flag and label, and with a label
the analytics' positive replies. (The intake records replies: outreach.intake.replies.)"""

from django.db import transaction
from django.utils import timezone

from outreach.analytics import POSITIVE_LABELS, Hit, hits_add
from outreach.conversations.rules import reply_labelled
from outreach.models.conversations import Reply

_UNSET = object()


def reply_update(*, reply: Reply, read=_UNSET, label=_UNSET) -> Reply:
    """Mark a reply read or unread, and set its label (a person's or an agent's:
    `manual`) or clear it (""). A label set fires the campaign's on_reply rule for it
    (outreach.conversations.rules: once per enrollment and rule) and reply.labelled;
    nothing else changes with a label (a person who reads "please remove me"
    suppresses the contact through the API). The reply's row is locked for the
    change, so requests at once apply one after the other."""
    changes: dict = {}
    if read is not _UNSET:
        changes["read"] = read
    if label is not _UNSET:
        changes["label"] = label
        changes["label_source"] = Reply.LabelSource.MANUAL if label else ""
    if not changes:
        return reply
    now = timezone.now()
    changes["updated_at"] = now
    with transaction.atomic():
        reply = Reply.objects.select_for_update().get(pk=reply.pk)
        Reply.objects.filter(pk=reply.pk).update(**changes)
        if label is not _UNSET:
            _positive_count(reply, label)
        for name, value in changes.items():
            setattr(reply, name, value)
        if label is not _UNSET and label:
            reply_labelled(reply, now=now)
    return reply


def _positive_count(reply: Reply, label: str) -> None:
    """A reply labelled positive counts once in the analytics' positive_replies, in the
    hour it was received; relabelled to anything else, it is taken back from that hour
    (docs/analytics.md). Call it holding the reply's row, before its label changes."""
    was, now = reply.label in POSITIVE_LABELS, label in POSITIVE_LABELS
    if was != now and reply.enrollment_id is not None:
        hits_add(
            [Hit("positive_replies", reply.enrollment_id, reply.received_at, n=1 if now else -1)]
        )
