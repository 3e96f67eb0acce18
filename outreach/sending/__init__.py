"""Sending: the scheduler, the batch sender, the SMTP transaction, MIME message building
with the signed tokens its links carry (`tokens`), the record of a send, and the bounce
rule every bounce source shares (`bounces`)."""
