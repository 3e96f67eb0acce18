"""Intake: every signal that comes back after a send.

- `services`: one service per signal (`enrollment_mark_opened`, `enrollment_mark_replied`,
  `contact_unsubscribe`; bounces are `outreach.intake.bounces.enrollment_mark_bounced`),
  each owning its state rules and emitting its events in the same transaction;
- `relay`: Mailgun / SendGrid event webhooks (verification, parsing, one transaction per batch);
- `mailbox`: IMAP polling (replies, auto-replies, delivery status reports), over `imap`;
- `views`: the public endpoints (open pixel, unsubscribe, relay webhooks, OAuth callback),
  with `tokens` signing the open and unsubscribe links;
- `tasks` / `beat`: the mailbox polls.

docs/intake.md describes the rules.
"""
