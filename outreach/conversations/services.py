"""Changing conversations from the API: a reply's read flag and label. (The intake
records replies: outreach.conversations.intake.)"""

from django.utils import timezone

from outreach.models.conversations import Reply

_UNSET = object()


def reply_update(*, reply: Reply, read=_UNSET, label=_UNSET) -> Reply:
    """Mark a reply read or unread, and set its label (a person's or an agent's:
    `manual`) or clear it (""). One UPDATE; nothing else changes with a label (a
    person who reads "please remove me" suppresses the contact through the API)."""
    changes: dict = {}
    if read is not _UNSET:
        changes["read"] = read
    if label is not _UNSET:
        changes["label"] = label
        changes["label_source"] = Reply.LabelSource.MANUAL if label else ""
    if not changes:
        return reply
    changes["updated_at"] = timezone.now()
    Reply.objects.filter(pk=reply.pk).update(**changes)
    for name, value in changes.items():
        setattr(reply, name, value)
    return reply
