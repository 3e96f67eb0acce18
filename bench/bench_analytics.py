#!/usr/bin/env python
"""Analytics over time: a year of a million sends answers as fast as a day.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python bench/bench_analytics.py

One campaign (3 steps, 10 mailboxes) of 1,000,000 sends spread evenly over 365 days:
send i goes out in hour floor(i * 8760 / 1,000,000) of the year, from mailbox i % 10,
step i % 3, and adds to shard i % COUNTER_SHARDS. Its hourly rows (AnalyticsHour, four
grains) are inserted as the write path would have left them, by one SQL statement over
the million sends, then folded by beat's fold (outreach.analytics.fold), as a year of past
hours would be (it moves them into their days). The same shape's first day (~2,700 sends) is also sent through the real
write function (outreach.analytics.hits_add, for Message rows of another account) and its
rows compared with the generated ones, key by key and hour by hour: they must agree.

Then GET /analytics through the Django test client (the whole stack: authentication,
rate limits on Redis, validation, the one query, the JSON), alternating a 1-day series
and a 366-day daily series (the baseline and the measured, in the same minutes), SAMPLES
of each, for the account and for the campaign. Goal: the 366-day p50 under 2x the 1-day
p50.
"""

import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta

os.environ.setdefault("API_ACCOUNT_RATE_LIMIT", "100000")

from _setup import account_create, account_drop, api_keys_create, prepare  # noqa: E402

SENDS = int(os.environ.get("BENCH_SENDS", "1000000"))
SAMPLES = int(os.environ.get("BENCH_SAMPLES", "40"))
MAILBOXES, STEPS = 10, 3
HOURS = 8760
START = datetime(2025, 1, 1, tzinfo=UTC)

# The rows of `sends` sends numbered from 0, as the write path leaves them (module docstring).
_GENERATE = """
INSERT INTO outreach_analyticshour (account_id, hour, grain, campaign_id, credential_id,
    step_key, simulated, shard, sent, opened, clicked, replied, positive_replies,
    bounced_hard, bounced_soft, bounced_block, unsubscribed, complaints, responses)
SELECT %(account)s, %(start)s::timestamptz + make_interval(hours => s.h), g.grain,
    CASE WHEN g.grain IN ('campaign', 'step') THEN %(campaign)s::uuid END,
    CASE WHEN g.grain = 'credential' THEN (%(mailboxes)s::uuid[])[s.m + 1] END,
    CASE WHEN g.grain = 'step' THEN 's' || (s.k + 1) ELSE '' END,
    false, s.shard, count(*), 0, 0, 0, 0, 0, 0, 0, 0, 0, 0
FROM (
    SELECT (i::bigint * %(hours)s / %(total)s)::int AS h, i %% %(mailbox_count)s AS m,
        i %% %(step_count)s AS k, i %% %(shards)s AS shard
    FROM generate_series(%(first)s::integer, %(last)s::integer) AS i
) AS s
CROSS JOIN (VALUES ('account'), ('campaign'), ('credential'), ('step')) AS g(grain)
GROUP BY 2, 3, 4, 5, 6, 8
"""


def _shape(label: str):
    """An account with one campaign of STEPS steps and MAILBOXES mailboxes."""
    from outreach.models.campaigns import Campaign, CampaignStep
    from outreach.models.mailboxes import SmtpCredential

    account = account_create(label)
    campaign = Campaign.objects.create(account=account, name=f"{label} year")
    for position in range(1, STEPS + 1):
        CampaignStep.objects.create(
            campaign=campaign, position=position, key=f"s{position}", subject="Hi", body_text="Hi"
        )
    mailboxes = SmtpCredential.objects.bulk_create(
        SmtpCredential(account=account, from_email=f"m{i}@{label}.example", smtp_host="x")
        for i in range(MAILBOXES)
    )
    return account, campaign, mailboxes


def _generate(cursor, account, campaign, mailboxes, *, first: int, last: int) -> None:
    from config.db.counters import shard_count

    cursor.execute(
        _GENERATE,
        {
            "account": account.pk,
            "campaign": campaign.pk,
            "mailboxes": [m.pk for m in mailboxes],
            "start": START,
            "hours": HOURS,
            "total": SENDS,
            "mailbox_count": MAILBOXES,
            "step_count": STEPS,
            "shards": shard_count(),
            "first": first,
            "last": last,
        },
    )


def _written(account, campaign, mailboxes, count: int) -> None:
    """Sends 0..count-1 of the shape as Message rows, counted by the real write function."""
    from outreach.analytics import Hit, hits_add
    from outreach.models.contacts import Contact
    from outreach.models.sending import Enrollment, Message

    contacts = Contact.objects.bulk_create(
        Contact(account=account, email=f"c{i}@sample.example", email_lower=f"c{i}@sample.example")
        for i in range(count)
    )
    enrollments = Enrollment.objects.bulk_create(
        Enrollment(campaign=campaign, contact=c, status="sent") for c in contacts
    )
    messages = Message.objects.bulk_create(
        Message(
            account=account,
            enrollment=e,
            credential=mailboxes[i % MAILBOXES],
            step=i % STEPS + 1,
            step_key=f"s{i % STEPS + 1}",
            message_id=f"{i}.{account.pk}@sample.example",
            to_email=f"c{i}@sample.example",
            sent_at=START + timedelta(hours=i * HOURS // SENDS),
        )
        for i, e in enumerate(enrollments)
    )
    for n in range(0, count, 500):
        batch = messages[n : n + 500]
        hits_add([Hit("sent", m.enrollment_id, m.sent_at, message_id=m.pk) for m in batch])


def _by_key(cursor, account_id) -> dict:
    """The account's rows, shards summed, keyed by grain, position of the campaign, mailbox
    and step in their shape, and hour (so two accounts' rows compare)."""
    cursor.execute(
        """SELECT grain, campaign_id IS NOT NULL, c.from_email, step_key, hour, sum(sent)
        FROM outreach_analyticshour AS a LEFT JOIN outreach_smtpcredential AS c
            ON c.id = a.credential_id
        WHERE a.account_id = %s GROUP BY 1, 2, 3, 4, 5""",
        [account_id],
    )
    return {(g, c, (m or "").split("@")[0], k, h): n for g, c, m, k, h, n in cursor.fetchall()}


def _agree(cursor) -> int:
    """The first day, written for real and generated: the same rows. Returns its sends."""
    day = (24 * SENDS + HOURS - 1) // HOURS  # the sends of hours 0..23
    real = _shape("sample-real")
    generated = _shape("sample-gen")
    try:
        _written(*real, day)
        _generate(cursor, *generated, first=0, last=day - 1)
        mine, theirs = _by_key(cursor, real[0].pk), _by_key(cursor, generated[0].pk)
        if mine != theirs or sum(n for k, n in mine.items() if k[0] == "account") != day:
            sys.exit(f"the write path and the generator disagree: {len(mine)} / {len(theirs)} keys")
    finally:
        for account, _, _ in (real, generated):
            _drop(account)
    return day


def _drop(account) -> None:
    from outreach.models.analytics import AnalyticsDay, AnalyticsHour
    from outreach.models.sending import Message

    for model in (AnalyticsHour, AnalyticsDay, Message):
        rows = model.objects.filter(account=account)
        rows._raw_delete(rows.db)
    account_drop(account)


def _p50s(client, keys, paths: dict[str, str]) -> dict[str, float]:
    """Each path's median time in ms, SAMPLES requests each, alternating."""
    times: dict[str, list[float]] = {name: [] for name in paths}
    for n in range(SAMPLES + 3):
        for name, path in paths.items():
            auth = {"HTTP_AUTHORIZATION": f"Bearer {keys[n % len(keys)]}"}
            started = time.perf_counter()
            answer = client.get(path, **auth)
            elapsed = (time.perf_counter() - started) * 1000
            if answer.status_code != 200:
                sys.exit(f"{path}: {answer.status_code} {answer.content[:200]!r}")
            if n >= 3:  # warm-up left out
                times[name].append(elapsed)
    return {name: statistics.median(values) for name, values in times.items()}


def main() -> None:
    prepare()
    from django.db import connection
    from django.test import Client

    from outreach.analytics.fold import hours_fold
    from outreach.models.analytics import AnalyticsDay, AnalyticsHour

    with connection.cursor() as cursor:
        day = _agree(cursor)
        print(f"first day: {day} sends through hits_add == the generator's rows, key by key")
        account, campaign, mailboxes = _shape("year")
        try:
            started = time.perf_counter()
            _generate(cursor, account, campaign, mailboxes, first=0, last=SENDS - 1)
            rows = AnalyticsHour.objects.filter(account=account).count()
            print(f"{SENDS:,} sends: {rows:,} hourly rows in {time.perf_counter() - started:.1f} s")
            started = time.perf_counter()
            folded = hours_fold(before=START + timedelta(days=366))  # as beat does
            # As autovacuum does after the move deletes the hour rows.
            cursor.execute("VACUUM ANALYZE outreach_analyticshour")
            cursor.execute("ANALYZE outreach_analyticsday")
            days = AnalyticsDay.objects.filter(account=account).count()
            print(
                f"beat's fold: {folded:,} hour rows into {days:,} day rows "
                f"in {time.perf_counter() - started:.1f} s"
            )
            keys = api_keys_create(account, 4)
            year = {"from": "2025-01-01", "to": "2026-01-01"}  # 366 dates
            one = {"from": "2025-07-01", "to": "2025-07-01"}
            for scope in ("", f"&campaign_id={campaign.pk}"):
                paths = {
                    "1 day": f"/analytics?from={one['from']}&to={one['to']}{scope}",
                    "366 days": f"/analytics?from={year['from']}&to={year['to']}{scope}",
                }
                answer = Client().get(paths["366 days"], HTTP_AUTHORIZATION=f"Bearer {keys[0]}")
                total = answer.json()["totals"]["sent"]
                p50 = _p50s(Client(), keys, paths)
                ratio = p50["366 days"] / p50["1 day"]
                print(
                    f"{'campaign' if scope else 'account'}: total sent {total:,}; p50 1 day "
                    f"{p50['1 day']:.2f} ms, 366 days {p50['366 days']:.2f} ms: {ratio:.2f}x "
                    f"({'met' if ratio < 2 else 'NOT met'}: < 2x)"
                )
        finally:
            _drop(account)


if __name__ == "__main__":
    main()
