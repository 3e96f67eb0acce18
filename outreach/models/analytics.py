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

Past hours move into `AnalyticsDay` (beat's fold, outreach.analytics.fold): one row per
key and UTC day holding, for each counter, its running sums through the day's 24 hours,
so any local day, week or month is two array reads per UTC day it touches, whatever the
zone. A count is in exactly one of the two tables at any moment: the fold deletes the hour
rows it adds to a day in the same statement; a late event makes an hour row again.
`AnalyticsUtcDay` is the view both make per UTC day, for readers by UTC day.
"""

from django.contrib.postgres.fields import ArrayField
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
            # The past hours beat moves into their days (outreach.analytics.fold): the
            # last hours', and a few late ones.
            models.Index(fields=["hour"], name="analyticshour_hour_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.grain} {self.hour:%Y-%m-%d %H:00} of {self.account_id}"


def _running_sums() -> ArrayField:
    # c[k] (1-based) = the sum of the day's hours 0 .. k-1 (UTC): c[24] is the day's total.
    return ArrayField(models.IntegerField(), size=24)


class AnalyticsDay(models.Model):
    """A key's past hours of one UTC day (module docstring): written by beat's fold only."""

    id = models.BigAutoField(primary_key=True)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.CASCADE, related_name="+", db_index=False
    )
    day = models.DateField()
    grain = models.CharField(max_length=10, choices=AnalyticsHour.Grain.choices)
    campaign = models.ForeignKey(Campaign, null=True, on_delete=models.CASCADE, related_name="+")
    credential = models.ForeignKey(
        SmtpCredential, null=True, on_delete=models.CASCADE, related_name="+"
    )
    step_key = models.CharField(max_length=40, default="", blank=True)
    simulated = models.BooleanField(default=False)

    sent = _running_sums()
    opened = _running_sums()
    clicked = _running_sums()
    replied = _running_sums()
    positive_replies = _running_sums()
    bounced_hard = _running_sums()
    bounced_soft = _running_sums()
    bounced_block = _running_sums()
    unsubscribed = _running_sums()
    complaints = _running_sums()
    responses = _running_sums()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "account",
                    "grain",
                    "campaign",
                    "credential",
                    "step_key",
                    "day",
                    "simulated",
                ],
                name="analyticsday_key",
                nulls_distinct=False,
            )
        ]
        # The platform's days for the staff dashboard (account grain).
        indexes = [models.Index(fields=["grain", "day"], name="analyticsday_grain_day_idx")]

    def __str__(self) -> str:
        return f"{self.grain} {self.day} of {self.account_id}"


class AnalyticsUtcDay(models.Model):
    """Each key's counters per UTC day, from both tables (a view; read-only): the staff
    dashboard's and the mailbox list's source. Its SQL: migration 0041 (a new counter
    redefines it in its own migration)."""

    id = models.TextField(primary_key=True)
    account = models.ForeignKey(
        "accounts.Account", on_delete=models.DO_NOTHING, related_name="+", db_constraint=False
    )
    day = models.DateField()
    grain = models.CharField(max_length=10, choices=AnalyticsHour.Grain.choices)
    campaign = models.ForeignKey(
        Campaign, null=True, on_delete=models.DO_NOTHING, related_name="+", db_constraint=False
    )
    credential = models.ForeignKey(
        SmtpCredential,
        null=True,
        on_delete=models.DO_NOTHING,
        related_name="+",
        db_constraint=False,
    )
    step_key = models.CharField(max_length=40)
    simulated = models.BooleanField()
    sent = models.IntegerField()
    opened = models.IntegerField()
    clicked = models.IntegerField()
    replied = models.IntegerField()
    positive_replies = models.IntegerField()
    bounced_hard = models.IntegerField()
    bounced_soft = models.IntegerField()
    bounced_block = models.IntegerField()
    unsubscribed = models.IntegerField()
    complaints = models.IntegerField()
    responses = models.IntegerField()

    class Meta:
        managed = False
        db_table = "outreach_analyticsutcday"

    def __str__(self) -> str:
        return f"{self.grain} {self.day} of {self.account_id}"
