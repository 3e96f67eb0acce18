"""Sending models: enrollments (a contact in a campaign, and where it is in the
sequence), the messages sent, the per-mailbox stats of a campaign and the scheduler's
send claims. See docs/outreach.md and docs/sending.md for the state rules."""

import uuid

from django.db import models
from django.db.models import Exists, OuterRef, Q

from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential


class EnrollmentQuerySet(models.QuerySet["Enrollment"]):
    def not_in_flight(self) -> "EnrollmentQuerySet":
        """Enrollments without an open claim: none of their steps is handed to a sender.
        A claimed enrollment keeps its next_send_at (the time its step was due) while it
        is in flight, so every reader of due work asks this too (the scheduler's scan,
        the backlog metric, the campaign's sending status). An anti-join answered by the
        partial unique index of open claims (sendclaim_open_unique)."""
        return self.exclude(Exists(SendClaim.objects.open().filter(enrollment_id=OuterRef("pk"))))


class Enrollment(models.Model):
    """A contact in a campaign, and where it is in the sequence."""

    class Status(models.TextChoices):
        PENDING = "pending"  # enrolled, not dispatched
        SCHEDULED = "scheduled"  # dispatched, no step sent yet
        SENT = "sent"  # a step was sent, more may follow
        COMPLETED = "completed"  # all steps sent
        REPLIED = "replied"
        BOUNCED = "bounced"
        UNSUBSCRIBED = "unsubscribed"
        FAILED = "failed"
        STOPPED = "stopped"  # ended by a rule or by hand, not by the contact

    class StopReason(models.TextChoices):
        MANUAL = "manual"
        DOMAIN_REPLY = "domain_reply"
        BLOCKED = "blocked"  # on the account's blocklist (outreach.blocklist)

    ACTIVE_STATUSES = (Status.PENDING, Status.SCHEDULED, Status.SENT)
    # Statuses whose next_send_at the scheduler watches.
    DUE_STATUSES = (Status.SCHEDULED, Status.SENT)

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index of its own: the page indexes lead with it, and each index more is written
    # by every send (the record moves the enrollment: not a HOT update, so every index of
    # the table gets an entry; bench/README.md, "WAL per send").
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="enrollments", db_index=False
    )
    # No index of its own either: enrollment_unique leads with it.
    contact = models.ForeignKey(
        Contact, on_delete=models.CASCADE, related_name="enrollments", db_index=False
    )
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.PENDING)
    # Number of email steps sent (API.md 17: branches are not counted).
    current_step = models.PositiveSmallIntegerField(default=0)
    # The position of the last email step sent (0 before any): what an open, reply or
    # bounce answered (opened_on, ...) and the key of `variants`. Equal to current_step
    # in a campaign without branches.
    last_step = models.PositiveSmallIntegerField(default=0, db_default=0)
    # The key of the element the enrollment sends or waits at next (API.md 17), set at
    # dispatch and by every move; null while pending and once it has ended.
    current_key = models.CharField(max_length=40, null=True, blank=True)
    # The keys of the elements passed, in order: sent steps and decided branches.
    path = models.JSONField(default=list, blank=True, db_default=[])
    # Waiting at a branch (current_key a branch, status `sent`, next_send_at null): when
    # its `else` is taken. Null otherwise.
    branch_deadline = models.DateTimeField(null=True, blank=True)
    # An out-of-office return met while waiting at a branch: the step the branch leads
    # to is not sent before it.
    held_until = models.DateTimeField(null=True, blank=True)
    next_send_at = models.DateTimeField(null=True, blank=True)
    # The mailbox of the thread: follow-ups go out from it, replies are looked for in it.
    # Its index serves the SET NULL of a deleted mailbox (DELETE /smtp_credentials/:id).
    credential = models.ForeignKey(
        SmtpCredential,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="enrollments",
    )
    dispatched_at = models.DateTimeField(null=True, blank=True)
    sent_at = models.DateTimeField(null=True, blank=True)  # last step sent
    opened_at = models.DateTimeField(null=True, blank=True)
    clicked_at = models.DateTimeField(null=True, blank=True)  # first tracked click
    replied_at = models.DateTimeField(null=True, blank=True)
    bounced_at = models.DateTimeField(null=True, blank=True)
    bounce_reason = models.TextField(null=True, blank=True)
    # What the bounce meant (outreach.bounce_types): hard, soft or block, and its
    # category from the published list; null unless bounced by a classified refusal.
    bounce_type = models.CharField(max_length=8, null=True, blank=True)
    bounce_category = models.CharField(max_length=32, null=True, blank=True)
    unsubscribed_at = models.DateTimeField(null=True, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)
    stopped_at = models.DateTimeField(null=True, blank=True)
    stop_reason = models.CharField(
        max_length=16, choices=StopReason.choices, blank=True, default=""
    )
    # The A/B variant drawn for each step, {"<position>": "B"}, drawn at the step's first
    # send attempt and kept for its retries (outreach.campaigns.variants).
    variants = models.JSONField(default=dict, blank=True)
    # Temporary send failures (4xx, connection) so far, and the last one; `failed` past a bound.
    send_attempts = models.PositiveSmallIntegerField(default=0)
    last_error = models.TextField(blank=True, default="")
    # The step and variant ("2B") whose message the open, reply or bounce answered: the
    # last step sent when it arrived ("" before any). Per-variant stats count these.
    opened_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    replied_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    bounced_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    # The step and variant of the link of the first click (the link's token names it).
    clicked_on = models.CharField(max_length=8, blank=True, default="", db_default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = EnrollmentQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        # Each index below (and the primary key, and the credential's) gets an entry at
        # every send. What reads each:
        constraints = [
            # A contact once per campaign; led by the contact, it also serves the
            # contact's enrollments (unsubscribes, bounces, replies, a contact's deletion).
            models.UniqueConstraint(fields=["contact", "campaign"], name="enrollment_unique")
        ]
        indexes = [
            # Keyset pages (config.api.pagination) of GET /campaigns/:id/enrollments, by
            # status and all: the order, tie-breaker included. They also serve every
            # read and write of a campaign's enrollments (dispatch, stats, completion,
            # the campaign's deletion).
            models.Index(
                fields=["campaign", "status", "created_at", "id"],
                name="enrollment_status_page_idx",
            ),
            models.Index(
                fields=["campaign", "created_at", "id"], name="enrollment_campaign_page_idx"
            ),
            # The scheduler's scan, the backlog metric: due enrollments by next_send_at.
            models.Index(
                fields=["next_send_at"],
                name="enrollment_due_idx",
                condition=Q(status__in=["scheduled", "sent"]),
            ),
            # The scheduler's new threads per campaign (scheduler._NEW_THREADS_SQL): the
            # due rows without a mailbox yet, by campaign and next_send_at. A send gives
            # the row its mailbox, so the record's move writes no entry here (only the
            # dispatch does, one per row).
            models.Index(
                fields=["campaign", "next_send_at"],
                name="enrollment_new_thread_idx",
                condition=Q(status__in=["scheduled", "sent"], credential__isnull=True),
            ),
            # Branch deadlines due (API.md 17): the waiting enrollments, by deadline.
            models.Index(
                fields=["branch_deadline"],
                name="enrollment_branch_deadline_idx",
                condition=Q(status="sent", branch_deadline__isnull=False),
            ),
            # Completions by time (the follow-up sweep); a send that does not complete: none.
            models.Index(
                fields=["completed_at"],
                name="enrollment_completed_idx",
                condition=Q(status="completed"),
            ),
            # Those waiting at each branch of a campaign (stats' `waiting`); a send writes none.
            models.Index(
                fields=["campaign", "current_key"],
                name="enrollment_waiting_idx",
                condition=Q(status="sent", branch_deadline__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"{self.contact_id} in {self.campaign_id} ({self.status})"


class Message(models.Model):
    """One email accepted by an SMTP server for one step of one enrollment.

    Its Message-ID is what replies (In-Reply-To / References), delivery status
    reports and relay-provider events are matched against.
    """

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # No index: messages are read by enrollment or Message-ID (intake names the account
    # beside the Message-ID, which the unique index finds); only an account's deletion
    # looks its messages up by account (a rare staff action, reached through its
    # enrollments anyway), and every send would write an entry.
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # Indexed by message_enrollment_step_idx, which leads with it.
    enrollment = models.ForeignKey(
        Enrollment, on_delete=models.CASCADE, related_name="messages", db_index=False
    )
    # Indexed: a mailbox's first send (its first IMAP poll), the SET NULL of a deleted
    # mailbox.
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.SET_NULL, null=True, blank=True, related_name="messages"
    )
    # Step position (1-based) at send time; steps can be edited or removed later.
    step = models.PositiveSmallIntegerField()
    # The step's key at send time (API.md 17): what a branch's `of` names.
    step_key = models.CharField(max_length=40, blank=True, default="", db_default="")
    # This message's first open and first tracked click (its pixel and links name it);
    # a branch decides on them.
    opened_at = models.DateTimeField(null=True, blank=True)
    clicked_at = models.DateTimeField(null=True, blank=True)
    # The Message-ID header without angle brackets, e.g. "abc123@sender.example". Unique
    # by a constraint (Meta), which is matched by equality only: no pattern index beside.
    message_id = models.CharField(max_length=255)
    to_email = models.EmailField(max_length=254)
    subject = models.CharField(max_length=998, blank=True, default="")
    # The plain text as sent (the conversation's thread shows it), cut at
    # REPLY_BODY_MAX_CHARS.
    text = models.TextField(blank=True, default="", db_default="")
    # The step's A/B variant this message carried ("A": the step's own content).
    variant = models.CharField(max_length=1, default="A")
    sent_at = models.DateTimeField()
    # The server took the whole message but its reply to the final dot never came (the
    # connection dropped, or it timed out): it may or may not have been accepted. It is
    # counted as sent and never sent again (docs/sending.md, "Unknown outcomes").
    reply_seen = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-sent_at"]
        # The thread (conversations), earlier messages of a reply, an enrollment's deletion.
        indexes = [models.Index(fields=["enrollment", "step"], name="message_enrollment_step_idx")]
        # Replies, delivery reports and relay events are matched by Message-ID.
        constraints = [models.UniqueConstraint(fields=["message_id"], name="message_id_unique")]

    def __str__(self) -> str:
        return f"<{self.message_id}> step {self.step} to {self.to_email}"


class CredentialCampaignStats(models.Model):
    """Send verdicts and bounces of one mailbox in one campaign: the bounce rate that
    auto-disables a credential (outreach.sending.bounces) is bounces / sends of this row.

    `sends` counts messages the server gave a verdict on: accepted (Message rows) and
    permanently rejected at send time (a synchronous bounce never becomes a Message, but
    it was an attempt to that address from this mailbox). Kept as counters, updated with
    F() in the transactions that send and bounce, so the rate is one row read.
    """

    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.CASCADE, related_name="campaign_stats"
    )
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="credential_stats"
    )
    sends = models.PositiveIntegerField(default=0)
    bounces = models.PositiveIntegerField(default=0)

    class Meta:
        verbose_name_plural = "credential campaign stats"
        constraints = [
            models.UniqueConstraint(
                fields=["credential", "campaign"], name="credential_campaign_stats_unique"
            )
        ]

    def __str__(self) -> str:
        return f"{self.credential_id} in {self.campaign_id}: {self.bounces}/{self.sends}"

    @property
    def bounce_rate(self) -> float:
        """Percent; 0 before the first send."""
        return 100.0 * self.bounces / self.sends if self.sends else 0.0


class SendClaimQuerySet(models.QuerySet["SendClaim"]):
    def open(self) -> "SendClaimQuerySet":
        """Claims in flight: not finished (given back ones are deleted)."""
        return self.filter(finished_at__isnull=True)


class SendClaim(models.Model):
    """One enrollment step handed to a sending task, then the record of its SMTP attempt.

    The scheduler creates it and reserves a unit of the mailbox's daily limit; at most
    one claim of an enrollment is open (unfinished) at a time, and an open claim is what
    keeps its enrollment out of the scheduler's scan (the enrollment row is not written:
    its next_send_at stays the time the step was due, `due_at`). The sender sets
    `sending_at` (a conditional UPDATE) right before the SMTP transaction, and finishes
    the row in the transaction that records the outcome (`finished_at`, `outcome`, the
    server's reply): the row is kept as the attempt, as a webhook delivery keeps its
    attempt. A claim given back before any SMTP command (a reply or a pause meanwhile,
    the lease's margin, a worker stopping, another claim of the batch hit a mailbox
    failure) was no attempt: it is deleted. A claim left behind by a dead worker is
    found when its lease lapses: never started, it is deleted and the enrollment is due
    again at once, as it was; started (`sending_at` set), the outcome is unknown: it is
    recorded as sent with its reply unseen and never sent again (docs/sending.md,
    "Unknown outcomes").
    Attempts go with their enrollment; a deleted mailbox leaves them without one.
    """

    class Outcome(models.TextChoices):
        # Accepted (250 to the end of DATA), or its reply never came (outcome_unknown):
        # counted as sent either way.
        SENT = "sent"
        BOUNCED = "bounced"  # 5xx to RCPT TO or to DATA
        DEFERRED = "deferred"  # 4xx, a broken, refused or timed out connection: retried
        FAILED = "failed"  # no retry can help (the message could not be built or expressed)
        # The mailbox's fault (authentication, TLS, MAIL FROM refused, the outbound guard):
        # the batch waits, no attempt is counted against the enrollment.
        MAILBOX_FAILED = "mailbox_failed"

    id = models.BigAutoField(primary_key=True)
    # Indexed by sendclaim_enrollment_idx, which leads with it.
    enrollment = models.ForeignKey(
        Enrollment, on_delete=models.CASCADE, related_name="send_claims", db_index=False
    )
    # Identifies one scheduler hand-off; a task only sends the claims of its own batch
    # (found among the open claims: sendclaim_open_unique).
    batch_id = models.UUIDField()
    # Indexed by sendclaim_credential_idx (the mailbox's attempts, newest first).
    credential = models.ForeignKey(
        SmtpCredential,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="+",
        db_index=False,
    )
    step = models.PositiveSmallIntegerField()
    claimed_at = models.DateTimeField()
    # When the step was due (the enrollment's next_send_at the scheduler found): a
    # sent message's lateness counts from it (config/metrics.py). Null on older claims.
    due_at = models.DateTimeField(null=True, blank=True)
    lease_until = models.DateTimeField()
    sending_at = models.DateTimeField(null=True, blank=True)
    # Set with sending_at: the message on its way, so that a send whose worker was lost
    # is recorded as the message it was (docs/sending.md, "Unknown outcomes").
    message_id = models.CharField(max_length=255, blank=True, default="")
    subject = models.CharField(max_length=998, blank=True, default="")
    to_email = models.CharField(max_length=254, blank=True, default="")
    # Its plain text as sent, cut at REPLY_BODY_MAX_CHARS (Message.text); emptied when
    # the attempt finishes (a sent message keeps it in its Message row).
    text = models.TextField(blank=True, default="", db_default="")
    # The recipient domain count (outreach.domain_cap) this claim reserved a unit of, to
    # give back if it does not send; null when no cap applied.
    domain_count_id = models.BigIntegerField(null=True, blank=True)
    # The attempt's end: set by the transaction that records its outcome.
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(
        max_length=16, choices=Outcome.choices, blank=True, default="", db_default=""
    )
    # The server's reply code (null without one: a broken connection, a refused
    # address, a failure before the server said anything) and the reply or the failure
    # as text: the enrollment's or the mailbox's last_error is this text.
    reply_code = models.PositiveSmallIntegerField(null=True, blank=True)
    reply_text = models.TextField(blank=True, default="", db_default="")
    # Sent, but the server's reply to the end of DATA never came (or the worker was lost):
    # it may or may not have been accepted (Message.reply_seen false).
    outcome_unknown = models.BooleanField(default=False, db_default=False)
    # From the first command of the attempt to its outcome (null when not measured: the
    # worker was lost, or nothing was tried).
    duration_ms = models.PositiveIntegerField(null=True, blank=True)

    objects = SendClaimQuerySet.as_manager()

    class Meta:
        verbose_name = "send attempt"
        constraints = [
            # One claim in flight per enrollment: a second one fails its claim transaction
            # (the scheduler's race guard). It also answers "in flight?" for the scan's
            # anti-join (EnrollmentQuerySet.not_in_flight), and it is the index of the
            # open claims: they are few (at most a batch per mailbox), and the sender's
            # load of a task's batches, the recovery of lapsed leases and the busy
            # mailboxes read them all through it, with no index of their own by batch
            # or lease (each claim would write an entry).
            models.UniqueConstraint(
                fields=["enrollment"],
                condition=Q(finished_at__isnull=True),
                name="sendclaim_open_unique",
            )
        ]
        # The primary key and the two full indexes get an entry at the insert and
        # another at the finish (finished_at is in the open claims' index predicate: not
        # a HOT update); the open claims' index one at the insert. A task's batches are
        # found among the open claims (sendclaim_open_unique).
        indexes = [
            # An enrollment's attempts (its thread), its deletion.
            models.Index(fields=["enrollment", "step"], name="sendclaim_enrollment_idx"),
            # A mailbox's latest attempts (admin), the SET NULL of a deleted mailbox and
            # PostgreSQL's check of the foreign key then (without it, a scan of every
            # attempt at the deletion's commit).
            models.Index(fields=["credential", "claimed_at"], name="sendclaim_credential_idx"),
        ]

    def __str__(self) -> str:
        return f"attempt of {self.enrollment_id} step {self.step}"
