"""Sending: the scheduler, the batch sender, the SMTP transaction, MIME message building
with the signed tokens its links carry (`tokens`), the record of a send, and the bounce
rule every bounce source shares (`bounces`).

The route of one step, from due to its webhook POST, in order. Each floor calls the
floors below it and only returns upward: no module below calls back into one above
(tests/outreach/test_route.py traces a step and holds it to that; bench/walk_one_step.py
prints the route and its counts).

1. beat.schedule_sends (Celery beat) -> scheduler.schedule_due, one run:
   recovery (claims of dead workers, suppressed contacts' ends),
   campaigns.branch_moves (branches whose deadline passed), then the run's view
   (_RunView: the free mailboxes, pace, breaker pauses, the new threads' shares), then
   claim transactions: the due scan, _decide with the rules' modules, which read data
   and return answers (mailboxes.blockers, mailboxes.pace, rotation, blocklist,
   domain_cap, domains, campaigns.windows, mailboxes.simulator_day), and _write: the
   SendClaim rows. On commit, the claimed batches go to the broker.
2. tasks.send_mailboxes -> send.mailboxes_send: each mailbox's claims, in a thread of
   its own: its row (with the secret it logs in with, decrypted here and nowhere
   earlier; its other secrets are not loaded), the variants and the replies' earlier
   messages (message.thread_messages).
3. batch.MailboxBatch.run, per mailbox, its transport decided once: the mailbox's
   server (mailboxes.smtp.smtp_connect through config.outbound's guard), or for a
   sandbox mailbox the simulator's in memory (simulator, never entered by a real
   mailbox's batch); then per message: breaker.held_until, message.message_build
   (campaigns.variants, campaigns.rendering, tokens, campaigns.tracking, mime),
   record_sql.mark_started, smtp.smtp_transaction, and the record of the answer
   (record.sent_record; a refusal: refusals, bounces).
4. record.sent_record: the enrollment's move (campaigns.branch_moves), then, in one
   transaction, record_sql's one statement (its only form): the claim finished, the
   Message, the enrollment, the mailbox's counters, the stats and analytics rows (in
   the lock order of outreach.enrollments.stats), billing's usage, the event and its
   delivery jobs through webhooks' own SQL (webhooks.sql). A row it needs that is
   missing (the period's usage record, once a period) is made and the same statement
   runs again. Then campaigns.followups; on commit,
   webhooks.events.drains_publish_on_commit.
5. webhooks.tasks.webhook_drain -> webhooks.delivery: the webhook's due jobs claimed
   (webhooks.jobs, one statement), posting (the signed envelope, the POST), the answers
   recorded (webhooks.answers, one statement), metrics observed.
6. Back in send.mailboxes_send, its batches done: campaigns.state (a campaign whose
   every enrollment is done completes).
"""
