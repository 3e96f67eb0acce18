"""Intake: every signal that comes back after a send.

- `services`: one service per signal (`enrollment_mark_opened`, `enrollment_mark_replied`,
  `contact_unsubscribe`; bounces are `outreach.sending.bounces.enrollment_mark_bounced`),
  each owning its state rules and emitting its events in the same transaction;
- `relay`: Mailgun / SendGrid event webhooks (verification, parsing, one transaction per batch);
- `mailbox`: IMAP polling (replies, auto-replies, delivery status reports), over
  `outreach.mailboxes.imap`;
- `views`: the public endpoints (open pixel, unsubscribe, relay webhooks, OAuth callback),
  reading the open and unsubscribe links' `outreach.sending.tokens`;
- `tasks` / `beat`: the mailbox polls.

docs/intake.md describes the rules.
"""
