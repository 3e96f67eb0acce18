"""The recipient domain cap: at most N sends a UTC day to the addresses of one domain.

A campaign's `max_per_recipient_domain_per_day`, or when it has none the account's
default (`GET/PATCH /sending_defaults`); consumer mail domains are never capped
(outreach.domains.consumer.CONSUMER_MAIL_DOMAINS). The count is the account's, across
all its campaigns and mailboxes: one `RecipientDomainCount` row per (account, domain,
UTC day) in PostgreSQL, so it survives worker restarts.

- `models.py`: RecipientDomainCount;
- `counts.py`: the cap in force, the rows locked and reserved by the send scheduler
  (outreach.sending.scheduler), the units given back by claims that did not send, the
  purge of past days;
- `api.py`: `/sending_defaults`; `beat.py`: the purge task.

The scheduler reserves a unit when it claims a send, like a mailbox's daily limit, under
the row's lock (`FOR UPDATE SKIP LOCKED`), so two schedulers racing never exceed the cap;
a claim that does not send gives it back (docs/deliverability.md, "Recipient domain cap").
"""
