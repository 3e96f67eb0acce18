"""A mailbox's deletion without indexes by mailbox (SmtpCredential.delete): its threads,
messages and attempts are found through its account's rows (bench/README.md, "WAL per
send, the next kilobyte")."""

from django.db import connection
from django.db.models.expressions import RawSQL

from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim

# The walk of mailbox_references_clear, campaign by campaign of the account: each LATERAL
# subquery is fenced (OFFSET 0) so the planner walks the account's rows by index (the
# enrollments' campaign index, the messages' enrollment index), never a scan of the whole
# table, which it would pick for a mailbox's few rows among many.
_ACCOUNT_THREADS = """
    SELECT e.id FROM outreach_campaign AS c CROSS JOIN LATERAL (
        SELECT id FROM outreach_enrollment WHERE campaign_id = c.id {mailbox} OFFSET 0) AS e
    WHERE c.account_id = %s
"""
_MESSAGES_UNLINK = f"""
UPDATE outreach_message SET credential_id = NULL WHERE id IN (
    SELECT m.id FROM ({_ACCOUNT_THREADS.format(mailbox="")}) AS e CROSS JOIN LATERAL (
        SELECT id FROM outreach_message
        WHERE enrollment_id = e.id AND credential_id = %s OFFSET 0) AS m)
"""  # noqa: S608 - constants; every value is a parameter


def mailbox_references_clear(credential: SmtpCredential) -> None:
    """Before a mailbox's deletion: its threads, messages and attempts lose their link to
    it, as SET_NULL would. No full index by mailbox (each send would write entries): the
    enrollments and their messages are walked through the account's campaigns (a
    campaign sends only from its account's mailboxes), the finished attempts through
    their partial index, the open ones among the few open claims."""
    with connection.cursor() as cursor:
        cursor.execute(_MESSAGES_UNLINK, [credential.account_id, credential.pk])
    threads = RawSQL(  # noqa: S611 - a constant of the code; every value is a parameter
        _ACCOUNT_THREADS.format(mailbox="AND credential_id = %s"),
        [credential.pk, credential.account_id],
    )
    Enrollment.objects.filter(pk__in=threads).update(credential=None)
    SendClaim.objects.filter(credential_id=credential.pk, finished_at__isnull=False).update(
        credential=None
    )
    SendClaim.objects.open().filter(credential_id=credential.pk).update(credential=None)
