"""The plans of the queries that lost an index a send wrote (bench/README.md, "WAL per
send, the next kilobyte"), on tables of a realistic size:

    psql -h 127.0.0.1 -U postgres -c 'CREATE DATABASE plans_bench'   # once, its own
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/plans_bench \
        .venv/bin/python bench/bench_index_plans.py

Fills the database (about 5 minutes): 20 accounts, 1,000 mailboxes of two of them, 20
campaigns of 10,000 enrollments, each with a sent message (200,000), 400,000 finished
attempts and 2,000 open claims (20 batches), 10 webhooks, 200,000 events and jobs (5%
pending); then prints EXPLAIN ANALYZE of each query (writes rolled back): the sweep and
the metrics (the jobs' due index), a mailbox's deletion (its SET NULL updates and the
foreign-key checks PostgreSQL runs when it commits), the reply fallback, a task's load, the busy mailboxes and the
recovery (the claims' batch index), the admin's attempts of a mailbox. Run it on a
database of its own: it keeps its rows."""

import os

from _setup import account_create, contacts_create, mailboxes_create, prepare, sent_create
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

import webhooks.events as events
from outreach.intake.selectors import enrollment_sent_from
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.send import batches_load
from webhooks.events import jobs_sweep
from webhooks.metrics import webhook_state_read
from webhooks.models import Webhook

# The other accounts: each of the first two accounts' campaigns but one moves to an account
# of its own, so that an account holds 5% of the rows, not half.
SPREAD = """
CREATE TEMP TABLE src AS SELECT * FROM accounts_account ORDER BY created_at LIMIT 1;
INSERT INTO accounts_account SELECT gen_random_uuid(), 'extra' || g || '@example.com', name,
    NULL, NULL, psp_subscription_status, psp_current_period_start, psp_current_period_end,
    created_at, plan_id, email_verified_at, '', tracking_domain_checked_at,
    tracking_domain_status, max_per_recipient_domain_per_day
FROM src, generate_series(1, 18) g;
WITH extra AS (
    SELECT id, row_number() OVER (ORDER BY email) n FROM accounts_account
    WHERE email LIKE 'extra%'),
camp AS (
    SELECT id, row_number() OVER (ORDER BY account_id, name) n FROM outreach_campaign
    WHERE name <> 'c0')
UPDATE outreach_campaign c SET account_id = extra.id FROM camp JOIN extra ON extra.n = camp.n
WHERE c.id = camp.id;
UPDATE outreach_contact ct SET account_id = cp.account_id
FROM outreach_enrollment e JOIN outreach_campaign cp ON cp.id = e.campaign_id
WHERE e.contact_id = ct.id AND ct.account_id <> cp.account_id;
UPDATE outreach_message m SET account_id = cp.account_id
FROM outreach_enrollment e JOIN outreach_campaign cp ON cp.id = e.campaign_id
WHERE e.id = m.enrollment_id AND m.account_id <> cp.account_id;
"""

# Enrollments (and messages) per campaign; fewer for a quick look at the plans' shape.
PER_CAMPAIGN = int(os.environ.get("BENCH_PER_CAMPAIGN", "10000"))

prepare()

now = timezone.now()
for a in range(2):
    account = account_create(f"x{a}")
    boxes = mailboxes_create(account, 500, port=2525)
    for c in range(10):
        campaign = Campaign.objects.create(account=account, name=f"c{c}", status="active")
        campaign.credentials.add(*boxes)
        contacts = contacts_create(account, PER_CAMPAIGN, start=a * 1_000_000 + c * PER_CAMPAIGN)
        sent_create(campaign, contacts, credential=boxes[0], at=now)
    for w in range(5):
        Webhook.objects.create(
            account=account, url=f"https://h{w}.example/in", event_filters=["*"], secret="s"
        )
with connection.cursor() as cur:
    cur.execute("""
    UPDATE outreach_enrollment e SET credential_id = (
      SELECT id FROM outreach_smtpcredential c WHERE c.account_id = cp.account_id
      ORDER BY md5(c.id::text || e.id::text) LIMIT 1)
    FROM outreach_campaign cp WHERE cp.id = e.campaign_id""")
    cur.execute(
        "UPDATE outreach_message m SET credential_id = e.credential_id FROM outreach_enrollment e WHERE e.id = m.enrollment_id"
    )
    cur.execute("""
    INSERT INTO outreach_sendclaim (enrollment_id, batch_id, credential_id, step, claimed_at, due_at,
      lease_until, sending_at, message_id, subject, to_email, text, finished_at, outcome, reply_code,
      reply_text, outcome_unknown, duration_ms)
    SELECT m.enrollment_id, gen_random_uuid(), m.credential_id, 1, m.sent_at - interval '1 day' * (g % 30), m.sent_at,
      m.sent_at, m.sent_at, m.message_id, '', m.to_email, '', m.sent_at, CASE WHEN g = 1 THEN 'sent' ELSE 'deferred' END,
      250, '250 ok', false, 100
    FROM outreach_message m, generate_series(1, 2) g""")
    cur.execute("""
    WITH open AS (
      SELECT e.id, e.credential_id, row_number() OVER () AS n FROM outreach_enrollment e
      ORDER BY random() LIMIT 2000)
    INSERT INTO outreach_sendclaim (enrollment_id, batch_id, credential_id, step, claimed_at, due_at,
      lease_until, message_id, subject, to_email, text, outcome, reply_text, outcome_unknown)
    SELECT id, md5('batch' || (n / 100))::uuid, credential_id, 2, now(), now(), now() + interval '5 minutes',
      '', '', '', '', '', '', false FROM open""")
    cur.execute("""
    INSERT INTO webhooks_event (id, account_id, type, data, created_at)
    SELECT gen_random_uuid(), m.account_id, 'enrollment.sent', '{}'::json, now() - interval '1 second' * g
    FROM (SELECT account_id FROM outreach_message LIMIT 200000) m, LATERAL (SELECT (random() * 2592000)::int AS g) r""")
    cur.execute("""
    INSERT INTO webhooks_deliveryjob (id, event_id, webhook_id, state, attempts, next_attempt_at, created_at, finished_at)
    SELECT gen_random_uuid(), ev.id, (SELECT w.id FROM webhooks_webhook w WHERE w.account_id = ev.account_id
        ORDER BY md5(w.id::text || ev.id::text) LIMIT 1),
      CASE WHEN random() < 0.05 THEN 'pending' ELSE 'succeeded' END, 1,
      ev.created_at + interval '1 hour' * (random() * 2 - 1), ev.created_at, ev.created_at
    FROM webhooks_event ev""")
    for statement in SPREAD.split(";\n"):
        if statement.strip():
            cur.execute(statement)
    cur.execute("VACUUM ANALYZE")


class Rollback(Exception):
    pass


def captured(fn):
    with CaptureQueriesContext(connection) as ctx:
        try:
            with transaction.atomic():
                fn()
                raise Rollback
        except Rollback:
            pass
    return [
        q["sql"]
        for q in ctx.captured_queries
        if q["sql"].lstrip().upper().startswith(("SELECT", "UPDATE", "WITH", "DELETE"))
    ]


def explain(title, sql):
    try:
        with transaction.atomic():
            with connection.cursor() as cur:
                cur.execute("EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING ON) " + sql)
                plan = [r[0] for r in cur.fetchall()]
            raise Rollback
    except Rollback:
        pass
    print(f"### {title}\n{sql[:600]}\n" + "\n".join(plan) + "\n")


credential = SmtpCredential.objects.order_by("pk")[7]
events.drains_enqueue = lambda *, webhook_ids: len(webhook_ids)
for sql in captured(lambda: jobs_sweep()):
    explain("jobs_sweep", sql)
for sql in captured(lambda: list(webhook_state_read())):
    explain("webhook metrics", sql)
for sql in captured(lambda: SmtpCredential.objects.get(pk=credential.pk).delete()):
    if sql.startswith("UPDATE"):
        explain("a mailbox's deletion: SET NULL", sql)
# What PostgreSQL runs for each deleted mailbox when the deletion commits (the foreign
# keys are deferred): an index by mailbox on each referencing table, or a scan of it.
for table in ("outreach_message", "outreach_enrollment", "outreach_sendclaim"):
    explain(
        f"a mailbox's deletion: the foreign-key check of {table}",
        f"SELECT 1 FROM ONLY {table} x WHERE credential_id = '{credential.pk}' "  # noqa: S608 - constants and a UUID of the bench's
        "FOR KEY SHARE OF x",
    )
contact_email = Enrollment.objects.filter(credential=credential).values_list(
    "contact__email_lower", flat=True
)[0]
for sql in captured(lambda: enrollment_sent_from(credential=credential, email=contact_email)):
    explain("enrollment_sent_from", sql)
batch = SendClaim.objects.open().values_list("batch_id", flat=True)[0]
groups = [
    (str(c), [str(batch)])
    for c in set(
        SendClaim.objects.open().filter(batch_id=batch).values_list("credential_id", flat=True)
    )
]
for sql in captured(lambda: batches_load(groups)):
    if "outreach_sendclaim" in sql:
        explain("batches_load (a batch of 100 claims)", sql)
now = timezone.now()
for sql in captured(
    lambda: list(
        SendClaim.objects.open()
        .filter(claimed_at__lt=now, lease_until__gt=now)
        .values_list("credential_id", flat=True)
        .distinct()
    )
):
    explain("scheduler: busy mailboxes", sql)
for sql in captured(
    lambda: list(
        SendClaim.objects.open()
        .select_for_update(skip_locked=True)
        .filter(lease_until__lte=now)
        .order_by("lease_until")[:1000]
    )
):
    explain("recovery: lapsed leases", sql)
for sql in captured(
    lambda: list(
        SendClaim.objects.filter(credential=credential, finished_at__isnull=False).order_by(
            "-claimed_at", "-pk"
        )[:50]
    )
):
    explain("admin: a mailbox's latest 50 attempts", sql)
