"""Mailboxes: SMTP/IMAP credentials, OAuth 2.0, the authenticated SMTP and IMAP connections
(`smtp`, `imap`), pace and the daily quota, the mailbox check."""
