"""Conversation models: the replies the intake matched to an enrollment, and the
responses sent to them (docs/conversations.md)."""

import uuid

from django.db import models

from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment


class Reply(models.Model):
    """One inbound message the intake matched to an enrollment: a reply, an auto-reply
    or an out-of-office notice, decoded, with its label.

    Its body (text, new_text, html) is bounded (REPLY_BODY_MAX_CHARS), never logged,
    deleted with its contact, and purged after REPLY_RETENTION_DAYS (the metadata stays,
    `body_purged_at` says when).
    """

    class Label(models.TextChoices):
        INTERESTED = "interested"
        NOT_INTERESTED = "not_interested"
        NOT_NOW = "not_now"
        MEETING_BOOKED = "meeting_booked"
        WRONG_PERSON = "wrong_person"
        OUT_OF_OFFICE = "out_of_office"
        AUTO_REPLY = "auto_reply"
        UNSUBSCRIBE_REQUEST = "unsubscribe_request"
        OTHER = "other"

    class LabelSource(models.TextChoices):
        AUTO = "auto"  # set by the intake's rules
        MANUAL = "manual"  # set through the API, the SDK, the MCP server or the admin

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    enrollment = models.ForeignKey(Enrollment, on_delete=models.CASCADE, related_name="replies")
    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="replies")
    # The mailbox it arrived in: a response goes out from it.
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # The Message-ID header without angle brackets; for a message without one, a stable
    # stand-in made from the mailbox and the message's IMAP UID.
    message_id = models.CharField(max_length=255)
    in_reply_to = models.CharField(max_length=255, blank=True, default="")
    # The References chain, oldest first, without angle brackets.
    references = models.JSONField(default=list, blank=True)
    from_email = models.CharField(max_length=254, blank=True, default="")
    from_name = models.CharField(max_length=255, blank=True, default="")
    to = models.JSONField(default=list, blank=True)
    cc = models.JSONField(default=list, blank=True)
    subject = models.CharField(max_length=998, blank=True, default="")
    received_at = models.DateTimeField()
    text = models.TextField(blank=True, default="")
    new_text = models.TextField(blank=True, default="")
    html = models.TextField(blank=True, default="")
    # The text or the HTML was cut at REPLY_BODY_MAX_CHARS, or the message at
    # IMAP_MAX_MESSAGE_BYTES.
    truncated = models.BooleanField(default=False)
    attachments = models.JSONField(default=list, blank=True)  # [{filename, content_type, size}]
    label = models.CharField(max_length=24, choices=Label.choices, blank=True, default="")
    label_source = models.CharField(
        max_length=8, choices=LabelSource.choices, blank=True, default=""
    )
    read = models.BooleanField(default=False)
    # The sender was verified: the message names one the service sent (In-Reply-To,
    # References), or the receiving server's DMARC passed for its From domain. An
    # unverified reply is kept and shown, and changes nothing (docs/intake.md). Replies
    # kept before the check existed say true: they acted as replies.
    sender_verified = models.BooleanField(default=True)
    # out_of_office: the return date the notice gives; the next step waits until the day
    # after it.
    returns_on = models.DateField(null=True, blank=True)
    # What the campaign's on_reply rules did for this reply's label (API.md 17):
    # [{label, campaign_id, outcome: enrolled | already_enrolled | pending_over_cap}].
    rule_outcomes = models.JSONField(default=list, blank=True, db_default=[])
    # What was malformed in the message (kept, reported; never a crashed poll).
    defects = models.JSONField(default=list, blank=True)
    size = models.PositiveIntegerField(default=0)  # bytes read from the mailbox
    body_purged_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name_plural = "replies"
        ordering = ["-created_at"]
        constraints = [
            # The intake may see a message twice (a crash before its UID was remembered).
            models.UniqueConstraint(
                fields=["enrollment", "message_id"], name="reply_enrollment_message_unique"
            )
        ]
        indexes = [
            # Keyset pages (config.api.pagination), newest first, per account.
            models.Index(fields=["account", "created_at", "id"], name="reply_account_page_idx"),
            models.Index(fields=["enrollment", "received_at"], name="reply_thread_idx"),
            # The retention purge's scan.
            models.Index(
                fields=["received_at"],
                name="reply_body_kept_idx",
                condition=models.Q(body_purged_at__isnull=True),
            ),
        ]

    def __str__(self) -> str:
        return f"reply {self.id} from {self.contact_id}"


class ReplyResponse(models.Model):
    """An answer to a reply, sent at once from the mailbox that received it, in the
    same thread (docs/conversations.md, "Responding").

    Sent like a step: `sending_at` is set right before the SMTP transaction; a response
    whose worker was lost after that is recorded as sent with its reply unseen, and never
    sent again (docs/sending.md, "Unknown outcomes").
    """

    class Status(models.TextChoices):
        QUEUED = "queued"
        SENT = "sent"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey("accounts.Account", on_delete=models.CASCADE, related_name="+")
    reply = models.ForeignKey(Reply, on_delete=models.CASCADE, related_name="responses")
    enrollment = models.ForeignKey(Enrollment, on_delete=models.CASCADE, related_name="responses")
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="+")
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    # Without angle brackets; made when the response is created, so a retried send
    # carries the same one.
    message_id = models.CharField(max_length=255, unique=True)
    to_email = models.CharField(max_length=254)
    subject = models.CharField(max_length=998, blank=True, default="")
    body_text = models.TextField()
    body_html = models.TextField(blank=True, default="")
    in_reply_to = models.CharField(max_length=255, blank=True, default="")
    references = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.QUEUED)
    error = models.TextField(blank=True, default="")
    attempts = models.PositiveSmallIntegerField(default=0)
    # When its send may be tried (next): at creation, then after a temporary failure
    # the SENDING_RETRY_SCHEDULE's delay on. A queued response not started a lease
    # (SENDING_LEASE_SECONDS) past it lost its task: the recovery queues it again.
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    # Set right before the SMTP transaction (a conditional UPDATE): a send that began.
    sending_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)
    # False when the server's reply to the final dot was never seen (docs/sending.md).
    reply_seen = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["enrollment", "created_at"], name="response_thread_idx"),
            # Responses left queued by a lost worker (the recovery's scan).
            models.Index(
                fields=["created_at"],
                name="response_queued_idx",
                condition=models.Q(status="queued"),
            ),
        ]

    def __str__(self) -> str:
        return f"response {self.id} to {self.reply_id} ({self.status})"
