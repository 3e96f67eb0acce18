"""Deleting a mailbox: its threads, attempts and messages stay, without their link to
it; the enrollments and the attempts have no index by mailbox (a send would write its
entries), so the deletion finds them through the account's rows
(outreach.models.mailbox_unlink.mailbox_references_clear). Deleting an account takes them all."""

from datetime import timedelta

import pytest
from django.db import IntegrityError, connection, transaction
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message, SendClaim
from tests.outreach.test_sending import NOW, _campaign, _enroll, _more_mailboxes, _run

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _sent_from_two_mailboxes(sink, account):
    """A campaign of `account` whose two mailboxes each sent a message, and an open claim
    of the first one's (a message in flight)."""
    campaign = _campaign(sink, steps=2)
    first = campaign.credentials.get()
    [second] = _more_mailboxes(campaign, sink, 1)
    type(campaign).objects.filter(pk=campaign.pk).update(account=account)
    SmtpCredential.objects.filter(pk__in=[first.pk, second.pk]).update(account=account)
    for n in range(2):
        _enroll(campaign, email=f"to{n}@example.org")
    _run()
    in_flight = _enroll(campaign, email="later@example.org")
    SendClaim.objects.create(
        enrollment=in_flight,
        batch_id="00000000-0000-0000-0000-000000000001",
        credential=first,
        step=1,
        claimed_at=NOW,
        lease_until=timezone.now(),
    )
    by_mailbox = dict(Message.objects.values_list("credential_id", "enrollment_id"))
    assert set(by_mailbox) == {first.pk, second.pk}
    return first, second, by_mailbox


def _constraints_checked() -> None:
    """The foreign keys are checked at commit, which a test's transaction never reaches:
    check them now (raises IntegrityError on a dangling link)."""
    with connection.cursor() as cursor:
        cursor.execute("SET CONSTRAINTS ALL IMMEDIATE")


def test_a_deleted_mailbox_leaves_its_threads_attempts_and_messages_unlinked(
    sink, api_client, account, django_assert_max_num_queries, auth_queries
):
    deleted, kept, by_mailbox = _sent_from_two_mailboxes(sink, account)

    # The walk is a statement per table, whatever the rows: the enrollments, the
    # finished and the open attempts; then the deletion's own.
    with django_assert_max_num_queries(auth_queries + 20):
        response = api_client.delete(f"/smtp_credentials/{deleted.pk}")
    assert response.status_code == 204
    _constraints_checked()

    assert not SmtpCredential.objects.filter(pk=deleted.pk).exists()
    thread = Enrollment.objects.get(pk=by_mailbox[deleted.pk])
    assert (thread.status, thread.credential_id) == ("sent", None)
    assert Message.objects.get(enrollment=thread).credential_id is None
    assert SendClaim.objects.get(enrollment=thread).credential_id is None
    assert SendClaim.objects.open().get().credential_id is None
    # The other mailbox's rows keep their link.
    other = Enrollment.objects.get(pk=by_mailbox[kept.pk])
    assert other.credential_id == kept.pk
    assert Message.objects.get(enrollment=other).credential_id == kept.pk
    assert SendClaim.objects.get(enrollment=other).credential_id == kept.pk


def test_the_admin_deletes_mailboxes_with_their_links(sink, admin_client, account):
    deleted, kept, by_mailbox = _sent_from_two_mailboxes(sink, account)
    response = admin_client.post(
        reverse("admin:outreach_smtpcredential_changelist"),
        {"action": "delete_selected", "_selected_action": [deleted.pk], "post": "yes"},
    )
    assert response.status_code == 302
    assert list(SmtpCredential.objects.values_list("pk", flat=True)) == [kept.pk]
    assert Enrollment.objects.get(pk=by_mailbox[deleted.pk]).credential_id is None
    assert not SendClaim.objects.filter(credential_id=deleted.pk).exists()


def test_a_deletion_that_skips_the_walk_fails_instead_of_leaving_dangling_links(sink, account):
    deleted, _kept, _ = _sent_from_two_mailboxes(sink, account)
    with pytest.raises(IntegrityError), transaction.atomic():
        SmtpCredential.objects.filter(pk=deleted.pk).delete()  # not SmtpCredential.delete
        _constraints_checked()
    assert SmtpCredential.objects.filter(pk=deleted.pk).exists()


def test_an_account_deletion_takes_its_mailboxes_and_every_row_of_theirs(sink, account):
    _sent_from_two_mailboxes(sink, account)
    with connection.cursor() as cursor:
        # As in a transaction of its own: the foreign keys checked at its end (the sends
        # above made them immediate in the test's one transaction). Django deletes the
        # mailboxes and their threads in no particular order.
        cursor.execute("SET CONSTRAINTS ALL DEFERRED")
    Account.objects.filter(pk=account.pk).delete()
    _constraints_checked()
    for model in (SmtpCredential, Enrollment, Message, SendClaim):
        assert not model.objects.exists(), model


def test_a_mailbox_keeps_the_time_of_its_first_send(sink):
    # Messages have no index by mailbox: a first IMAP poll reads the mailbox's first
    # send from the mailbox (outreach.intake.mailbox), which the record keeps.
    campaign = _campaign(sink, steps=2)  # active after the first send
    credential = campaign.credentials.get()
    _enroll(campaign, email="first@example.org")
    _run()  # the campaign's first send: the record through the ORM
    later = NOW + timedelta(hours=1)
    _enroll(campaign, email="second@example.org", at=later)
    _run(later)  # then the one statement
    sent = Message.objects.filter(credential=credential).values_list("to_email", "sent_at")
    assert ("second@example.org", later) in set(sent)
    credential.refresh_from_db()
    assert credential.first_sent_at == NOW
