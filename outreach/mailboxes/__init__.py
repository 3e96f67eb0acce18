"""Mailboxes: SMTP/IMAP credentials, OAuth 2.0, pace and the daily quota, the mailbox check."""
