"""IMAP polling of OAuth mailboxes: SASL XOAUTH2 against a real Dovecot whose oauth2
passdb introspects each bearer token at the test's local authorization server."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.intake.mailbox import mailbox_poll, mailboxes_due
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.mail import reply
from tests.support.oauth_provider import credential_connect

pytestmark = [pytest.mark.django_db, requires_dovecot]

OWNER = "owner@gmail.example"


@pytest.fixture
def oauth_thread(oauth_provider, oauth_imap_mailbox):
    """A contact sent step 1 from an OAuth mailbox whose INBOX is on a XOAUTH2-only
    Dovecot, with an access token about to expire (so the poll refreshes it)."""
    provider = oauth_provider()
    mailbox = oauth_imap_mailbox(provider, OWNER)
    enrollment = sent_enrollment()
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    credential.imap_host, credential.imap_port = mailbox.host, mailbox.port
    credential.imap_security = "none"
    credential_connect(credential, provider, OWNER, expires_in=timedelta(minutes=1))
    return provider, mailbox, enrollment, credential


def test_it_polls_over_xoauth2_with_a_refreshed_token(oauth_thread):
    provider, mailbox, enrollment, credential = oauth_thread
    sent = first_message(enrollment)
    mailbox.append(reply(sender=enrollment.contact.email, to=OWNER, in_reply_to=sent.message_id))

    result = mailbox_poll(credential=credential)

    assert result.error == ""
    assert [o.kind for o in result.outcomes] == ["replied"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED
    assert provider.refresh_count() == 1
    credential.refresh_from_db()
    assert credential.imap_last_error == ""
    assert credential.oauth_access_token_expires_at > timezone.now() + timedelta(minutes=55)


def test_a_token_the_server_refuses_is_recorded_and_refreshed_next_time(oauth_thread):
    provider, mailbox, enrollment, credential = oauth_thread
    SmtpCredential.objects.filter(pk=credential.pk).update(
        oauth_access_token="not-a-token-the-provider-issued",
        oauth_access_token_expires_at=timezone.now() + timedelta(hours=1),
    )
    credential.refresh_from_db()

    result = mailbox_poll(credential=credential)

    assert "AUTHENTICATIONFAILED" in result.error or "failed" in result.error.lower()
    credential.refresh_from_db()
    assert credential.imap_last_error
    assert credential.oauth_access_token_expires_at is None  # forgotten
    mailbox.append(reply(sender=enrollment.contact.email, to=OWNER))
    assert mailbox_poll(credential=credential).error == ""
    assert provider.refresh_count() == 1


def test_a_revoked_grant_stops_the_polling_until_re_authorized(oauth_thread):
    provider, _mailbox, _enrollment, credential = oauth_thread
    provider.revoke(OWNER)

    result = mailbox_poll(credential=credential)

    assert "re-authorized" in result.error
    credential.refresh_from_db()
    assert credential.oauth_status == "reauthorization_required"
    assert "re-authorized" in credential.imap_last_error
    assert credential not in mailboxes_due()
