"""Campaign models: campaigns, steps and their kept stats."""

import uuid
from typing import Any

from django.db import models

from outreach.models.mailboxes import SmtpCredential


class Campaign(models.Model):
    class Status(models.TextChoices):
        DRAFT = "draft"
        ACTIVE = "active"
        PAUSED = "paused"
        COMPLETED = "completed"

    class PausedReason(models.TextChoices):
        MANUAL = "manual"
        ALL_CREDENTIALS_DISABLED = "all_credentials_disabled"

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="campaigns"
    )
    name = models.CharField(max_length=200)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.DRAFT)
    paused_reason = models.CharField(
        max_length=32, choices=PausedReason.choices, blank=True, default=""
    )
    paused_at = models.DateTimeField(null=True, blank=True)
    credentials = models.ManyToManyField(SmtpCredential, blank=True, related_name="campaigns")
    timezone = models.CharField(max_length=64, default="UTC")
    # {"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]} (ISO weekdays), or null:
    # always open. Read it through outreach.campaigns.windows.SendWindow.from_json.
    send_window = models.JSONField(null=True, blank=True)
    bounce_threshold_percent = models.FloatField(default=5.0)
    track_opens = models.BooleanField(default=True)
    # Links in the bodies lead through GET /t/c/<token> (outreach.campaigns.clicks).
    track_clicks = models.BooleanField(default=False)
    stop_on_reply = models.BooleanField(default=True)
    # A reply also stops the other active enrollments whose contact shares the replier's
    # email domain (consumer mail domains excepted: outreach.campaigns.stopping).
    stop_on_domain_reply = models.BooleanField(default=False)
    # Append an opt-out line to each body part that does not place {{unsubscribe_url}}.
    unsubscribe_footer = models.BooleanField(default=False)
    # The send window in each contact's own time zone (Contact.timezone), falling back
    # to `timezone` for contacts without one.
    send_in_contact_timezone = models.BooleanField(default=False)
    # Hold sends from mailboxes whose From domain check has an error (outreach.domains).
    require_authenticated_domain = models.BooleanField(default=False)
    # Sends a UTC day to one recipient domain, across the account's campaigns and
    # mailboxes (outreach.domain_cap); null: the account's default.
    max_per_recipient_domain_per_day = models.PositiveIntegerField(null=True, blank=True)
    # Follow-up campaigns (API.md 17): [{label, campaign_id, delay_minutes}], a reply to
    # this campaign given `label` enrols its contact in `campaign_id`; and
    # {campaign_id, delay_minutes, if}, an enrollment ended `completed` without a reply
    # enrols its contact there. Each acts once per enrollment (outreach.models.RuleFire).
    on_reply = models.JSONField(default=list, blank=True, db_default=[])
    on_complete = models.JSONField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            # Keyset pages (config.api.pagination): the order, tie-breaker included.
            models.Index(fields=["account", "created_at", "id"], name="campaign_account_page_idx"),
            models.Index(fields=["status"], name="campaign_status_idx"),
        ]

    def __str__(self) -> str:
        return self.name


class CampaignStep(models.Model):
    """One element of the sequence (API.md 17): an email step, or a branch (`branch`
    set) that sends nothing and waits for an open or click. `position` is the element's
    1-based place in `steps`, branches counted; elements are found by `key`, and the
    graph by `next_key` (an email step's) or the branch's then/else."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="steps")
    position = models.PositiveSmallIntegerField()
    # `[a-z0-9_]{1,40}`, unique in the campaign; `step_<position>` when not given.
    key = models.CharField(max_length=40)
    # The element an email step leads to, resolved at save: a key, or "end". Empty on
    # a branch (its then/else are in `branch`).
    next_key = models.CharField(max_length=40, blank=True, default="")
    # A branch: {"on": "opened" | "clicked" | "opened_or_clicked", "of": "<email step
    # key>" | "any", "within_minutes": n, "then": "<key>" | "end", "else": "<key>" |
    # "end"}, `of` resolved at save. Null on an email step.
    branch = models.JSONField(null=True, blank=True)
    # Empty on a later step: sent as a reply in the thread ("Re: <previous subject>").
    subject = models.CharField(max_length=998, blank=True, default="")
    body_text = models.TextField()
    body_html = models.TextField(blank=True, default="")
    # Step 1: from dispatch; later steps: from the previous step's send.
    delay_minutes = models.PositiveIntegerField(default=0)
    # A/B variants besides the step's own content (variant "A"): [{subject, body_text,
    # body_html}, ...], variants "B", "C", ... in order (outreach.campaigns.variants).
    variants = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["campaign", "position"]
        constraints = [
            models.UniqueConstraint(fields=["campaign", "position"], name="step_position_unique"),
            models.UniqueConstraint(fields=["campaign", "key"], name="step_key_unique"),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} step {self.position}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        # A step made without a key (the admin, a fixture) gets its default one.
        if not self.key:
            self.key = f"step_{self.position}"
        super().save(*args, **kwargs)


class CampaignStats(models.Model):
    """A campaign's enrollment counts, kept on write (outreach.enrollments): a campaign's
    stats are a few rows read however many enrollments it has.

    enrolled: enrollments; sent: enrollments with at least one step sent; opened /
    clicked / replied / bounced / unsubscribed: enrollments where that happened; stopped: ended by a
    rule or by hand. Each changes in the transaction of the enrollment change it counts;
    `manage.py campaign_stats` recounts.

    A campaign's counts are split into shards (config/db/counters.py): up to
    COUNTER_SHARDS rows, each a part of every count, read as their sum
    (outreach.enrollments.stats_read), so that the campaign's concurrent sends seldom
    wait for one row's lock.
    """

    # Its index is the unique (campaign, shard) one.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    shard = models.PositiveSmallIntegerField(default=0, db_default=0)
    enrolled = models.IntegerField(default=0, db_default=0)
    sent = models.IntegerField(default=0, db_default=0)
    opened = models.IntegerField(default=0, db_default=0)
    clicked = models.IntegerField(default=0, db_default=0)
    replied = models.IntegerField(default=0, db_default=0)
    bounced = models.IntegerField(default=0, db_default=0)
    unsubscribed = models.IntegerField(default=0, db_default=0)
    stopped = models.IntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "campaign stats"
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "shard"], name="campaign_stats_shard_unique"
            )
        ]

    def __str__(self) -> str:
        return f"stats of {self.campaign_id}, shard {self.shard}"


class StepVariantStats(models.Model):
    """One A/B variant of one step of a campaign, counted on write (outreach.enrollments):
    sent, the messages that carried it; opened / replied / bounced, the enrollments whose
    open, reply or bounce answered it (Enrollment.opened_on, ...: the last step sent when
    it arrived); clicked, the enrollments whose first click was on a link of its message
    (Enrollment.clicked_on). GET /campaigns/:id/stats reads these rows, summed over their
    shards (config/db/counters.py), as CampaignStats's."""

    # No index of its own: step_variant_stats_unique leads with it.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    step = models.PositiveSmallIntegerField()
    variant = models.CharField(max_length=1)
    shard = models.PositiveSmallIntegerField(default=0, db_default=0)
    sent = models.IntegerField(default=0, db_default=0)
    opened = models.IntegerField(default=0, db_default=0)
    clicked = models.IntegerField(default=0, db_default=0)
    replied = models.IntegerField(default=0, db_default=0)
    bounced = models.IntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "step variant stats"
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "step", "variant", "shard"], name="step_variant_stats_unique"
            )
        ]

    def __str__(self) -> str:
        return f"step {self.step}{self.variant} of {self.campaign_id}"


class BranchStats(models.Model):
    """The decisions of one branch of a campaign (API.md 17), counted on write in the
    transaction of each decision (outreach.enrollments.branching): `then_count`, the
    enrollments its event sent to `then`; `else_count`, those its deadline sent to
    `else`. Summed over shards (config/db/counters.py) as CampaignStats's. How many wait
    at it now is read from the enrollments' waiting index instead (a count kept on write
    would have to be taken back by every way an enrollment can leave a branch)."""

    # No index of its own: branch_stats_unique leads with it.
    campaign = models.ForeignKey(
        Campaign, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    key = models.CharField(max_length=40)
    shard = models.PositiveSmallIntegerField(default=0, db_default=0)
    then_count = models.IntegerField(default=0, db_default=0)
    else_count = models.IntegerField(default=0, db_default=0)

    class Meta:
        verbose_name_plural = "branch stats"
        constraints = [
            models.UniqueConstraint(fields=["campaign", "key", "shard"], name="branch_stats_unique")
        ]

    def __str__(self) -> str:
        return f"branch {self.key} of {self.campaign_id}"
