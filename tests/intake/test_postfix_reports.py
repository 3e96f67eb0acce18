"""A real peer: the mailbox's SMTP server is a real Postfix on loopback (STARTTLS and a
login checked by Dovecot, tests/support/postfix.py). The sending engine sends through it
to an unknown user and to a mailbox over quota; Postfix's own delivery status reports
come back into the Dovecot mailbox the service polls, and are classified `hard` (the
contact suppressed) and `soft` (the contact still sendable)."""

import os

import pytest
from django.utils import timezone

from outreach.intake.mailbox import mailbox_poll
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.intake.conftest import requires_dovecot
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.support.postfix import POSTFIX, Postfix

if POSTFIX is None and os.environ.get("CI"):
    pytest.fail("postfix is missing (apt-get install -y postfix, as .ci/run does)")

pytestmark = [
    pytest.mark.django_db(transaction=True),
    requires_dovecot,
    pytest.mark.skipif(
        POSTFIX is None,
        reason="needs a real Postfix: the postfix binary is absent "
        "(DEBIAN_FRONTEND=noninteractive apt-get install -y postfix, as .ci/run does)",
    ),
    pytest.mark.skipif(os.geteuid() != 0, reason="postfix(1) starts as root"),
]


@pytest.fixture
def postfix(dovecot_server):
    user, password = dovecot_server.user_take()
    server = Postfix(dovecot=dovecot_server, sender=("sender@sender.test", user))
    yield server, user, password
    server.stop()


def test_postfix_reports_an_unknown_user_hard_and_a_full_mailbox_soft(
    postfix, dovecot_server, settings
):
    server, user, password = postfix
    settings.SENDING_SMTP_CA_FILE = str(dovecot_server.ca_file)
    campaign = CampaignFactory(with_steps=1, status=Campaign.Status.ACTIVE)
    credential = campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        from_email="sender@sender.test",
        smtp_host=server.host,
        smtp_port=server.port,
        smtp_security="starttls",
        smtp_username=user,
        smtp_password=password,
        imap_host="127.0.0.1",
        imap_port=dovecot_server.port,
        imap_username=user,
        imap_password=password,
        imap_security="none",
    )
    credential.refresh_from_db()
    now = timezone.now()
    enrollments = {}
    for address in ("nobody@rcpt.test", "full@rcpt.test"):
        enrollments[address] = EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=campaign.account, email=address),
            status=Enrollment.Status.SCHEDULED,
            next_send_at=now,
            dispatched_at=now,
        )

    sent = 0
    for batch in schedule_due(now=now):
        result = batch_send(
            batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now
        )
        assert result.mailbox_error == "", server.log_text()
        sent += result.sent
    assert sent == 2, server.log_text()
    server.wait_idle()

    polled = mailbox_poll(credential=credential)
    assert polled.error == "", polled.error
    assert sorted(o.kind for o in polled.outcomes) == ["bounced", "bounced"], polled.outcomes

    unknown = Enrollment.objects.get(pk=enrollments["nobody@rcpt.test"].pk)
    assert unknown.status == Enrollment.Status.BOUNCED
    assert (unknown.bounce_type, unknown.bounce_category) == ("hard", "user_unknown")
    assert "unknown user" in unknown.bounce_reason
    assert Contact.objects.get(pk=unknown.contact_id).bounced_at is not None

    full = Enrollment.objects.get(pk=enrollments["full@rcpt.test"].pk)
    assert full.status == Enrollment.Status.BOUNCED
    assert (full.bounce_type, full.bounce_category) == ("soft", "mailbox_full")
    assert full.bounce_reason.startswith("5.2.2")
    assert Contact.objects.get(pk=full.contact_id).bounced_at is None
