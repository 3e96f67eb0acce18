"""A mailbox's deletion without indexes by mailbox (SmtpCredential.delete): its threads,
messages and attempts are found through its account's rows (bench/README.md, "WAL per
send, the next kilobyte")."""

from django.db import connection

from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import SendClaim

# The walk of mailbox_references_clear, campaign by campaign of the account: each LATERAL
# subquery is fenced (OFFSET 0) so the planner walks the account's rows by index (the
# enrollments' campaign index, the messages' enrollment index), never a scan of the whole
# table, which it would pick for a mailbox's few rows among many.
_ACCOUNT_THREADS = """
    SELECT e.id FROM outreach_campaign AS c CROSS JOIN LATERAL (
        SELECT id FROM outreach_enrollment WHERE campaign_id = c.id {mailbox} OFFSET 0) AS e
    WHERE c.account_id = %(account)s
"""
_MAILBOX_UNLINK = f"""
WITH messages AS (
    UPDATE outreach_message SET credential_id = NULL WHERE id IN (
        SELECT m.id FROM ({_ACCOUNT_THREADS.format(mailbox="")}) AS e CROSS JOIN LATERAL (
            SELECT id FROM outreach_message
            WHERE enrollment_id = e.id AND credential_id = %(credential)s OFFSET 0) AS m)
    RETURNING 1
)
UPDATE outreach_enrollment SET credential_id = NULL
WHERE id IN ({_ACCOUNT_THREADS.format(mailbox="AND credential_id = %(credential)s")})
  AND (SELECT count(*) FROM messages) >= 0
"""  # noqa: S608 - constants; every value is a parameter


def mailbox_references_clear(credential: SmtpCredential) -> None:
    """Before a mailbox's deletion: its threads, messages and attempts lose their link to
    it, as SET_NULL would. No full index by mailbox (each send would write entries): the
    enrollments and their messages are walked through the account's campaigns (a
    campaign sends only from its account's mailboxes), the finished attempts through
    their partial index, the open ones among the few open claims."""
    with connection.cursor() as cursor:
        cursor.execute(
            _MAILBOX_UNLINK, {"account": credential.account_id, "credential": credential.pk}
        )
    SendClaim.objects.filter(credential_id=credential.pk, finished_at__isnull=False).update(
        credential=None
    )
    SendClaim.objects.open().filter(credential_id=credential.pk).update(credential=None)
