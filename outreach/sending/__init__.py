"""Sending: the scheduler, the batch sender, SMTP, MIME message building and the
record of a send."""
