"""Analytics over time (API.md 21), kept on write: counters per hour, summed by
`GET /analytics` and the staff dashboard instead of counting messages and events.

One row per (account, hour, grain, shard). The grain says what the row is counted by:
- `account`: every event of the account (campaign, credential null, step_key "");
- `campaign`: campaign set (credential null, step_key "");
- `credential`: credential set (campaign null, step_key "");
- `step`: campaign and step_key set (credential null).
A query reads the one grain its filter names, so a year is at most 8,784 hours of one
grain, whatever the volume. `simulated` keeps the simulator's traffic apart (the API
counts it; the staff dashboard's platform totals leave it out). `shard` spreads one
hour's hot row over a few rows (as BranchStats does), summed on read.
"""

from django.db import models

from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential

COUNTERS = (
    "sent",
    "opened",
    "clicked",
    "replied",
    "positive_replies",
    "bounced_hard",
    "bounced_soft",
    "bounced_block",
    "unsubscribed",
    "complaints",
    "responses",
)


class AnalyticsHour(models.Model):
    class Grain(models.TextChoices):
        ACCOUNT = "account"
        CAMPAIGN = "campaign"
        CREDENTIAL = "credential"
        STEP = "step"

    id = models.BigAutoField(primary_key=True)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    # The hour's start, UTC.
    hour = models.DateTimeField()
    grain = models.CharField(max_length=10, choices=Grain.choices)
    campaign = models.ForeignKey(
        Campaign, null=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    credential = models.ForeignKey(
        SmtpCredential, null=True, on_delete=models.CASCADE, related_name="+", db_index=False
    )
    step_key = models.CharField(max_length=40, default="", blank=True)
    simulated = models.BooleanField(default=False)
    shard = models.PositiveSmallIntegerField(default=0, db_default=0)

    sent = models.IntegerField(default=0, db_default=0)
    opened = models.IntegerField(default=0, db_default=0)
    clicked = models.IntegerField(default=0, db_default=0)
    replied = models.IntegerField(default=0, db_default=0)
    positive_replies = models.IntegerField(default=0, db_default=0)
    bounced_hard = models.IntegerField(default=0, db_default=0)
    bounced_soft = models.IntegerField(default=0, db_default=0)
    bounced_block = models.IntegerField(default=0, db_default=0)
    unsubscribed = models.IntegerField(default=0, db_default=0)
    complaints = models.IntegerField(default=0, db_default=0)
    responses = models.IntegerField(default=0, db_default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "account",
                    "grain",
                    "campaign",
                    "credential",
                    "step_key",
                    "hour",
                    "simulated",
                    "shard",
                ],
                name="analyticshour_key",
                nulls_distinct=False,
            )
        ]
        indexes = [
            # The platform's hours for the staff dashboard (account grain).
            models.Index(fields=["grain", "hour"], name="analyticshour_grain_hour_idx"),
            # A campaign's or a mailbox's deletion finds its rows (tests/foundation's
            # foreign key rule); an hour's row is made once, its updates are HOT.
            models.Index(fields=["campaign"], name="analyticshour_campaign_idx"),
            models.Index(fields=["credential"], name="analyticshour_credential_idx"),
            # The shard rows beat folds into their hour's shard 0 (outreach.analytics.fold):
            # the current hour's, and a few late ones.
            models.Index(
                fields=["hour"], name="analyticshour_unfolded_idx", condition=models.Q(shard__gt=0)
            ),
        ]

    def __str__(self) -> str:
        return f"{self.grain} {self.hour:%Y-%m-%d %H:00} of {self.account_id}"
