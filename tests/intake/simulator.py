"""Simulator mailboxes' sent messages, as the send path leaves them: a campaign of a
simulator mailbox, an enrollment of `<name>+<outcome>@simulator.test`, the message built
by the send path's own builder (outreach.sending.message) and its Message row."""

from datetime import timedelta

from django.utils import timezone

from outreach.models.campaigns import CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.sending.message import message_build
from tests.outreach.factories import (
    CampaignFactory,
    ContactFactory,
    CredentialFactory,
    EnrollmentFactory,
)

BODY_TEXT = "Hi {{first_name}}, see https://acme.example/pricing and https://acme.example/docs."
BODY_HTML = '<p>Hi {{first_name}}, see <a href="https://acme.example/pricing">pricing</a>.</p>'


def simulator_credential(account, **kwargs) -> SmtpCredential:
    return CredentialFactory(
        account=account,
        auth_method=SmtpCredential.AuthMethod.SIMULATOR,
        smtp_host="",
        smtp_username="",
        smtp_password="",
        from_name="Sam Sender",
        **kwargs,
    )


def simulated_send(
    outcome: str, *, account=None, html: bool = True, steps: int = 2, name: str = "ada", **campaign
):
    """An enrollment of `<name>+<outcome>@simulator.test` sent step 1 of `steps` (each a
    day apart) from a simulator mailbox, a minute ago; (enrollment, message, the bytes
    sent). `campaign`: the campaign's settings (track_opens, track_clicks, ...)."""
    kwargs = {"account": account} if account is not None else {}
    record = CampaignFactory(
        status="active", with_steps=0, with_credential=False, **kwargs, **campaign
    )
    credential = simulator_credential(record.account)
    record.credentials.add(credential)
    for position in range(1, steps + 1):
        CampaignStep.objects.create(
            campaign=record,
            position=position,
            subject="Quick question about {{company}}" if position == 1 else "",
            body_text=BODY_TEXT,
            body_html=BODY_HTML if html else "",
            delay_minutes=0 if position == 1 else 60 * 24,
        )
    contact = ContactFactory(
        account=record.account,
        email=f"{name}+{outcome}@simulator.test",
        first_name=name.capitalize(),
        last_name="Lovelace",
    )
    now = timezone.now()
    sent_at = now - timedelta(minutes=1)
    enrollment = EnrollmentFactory(
        campaign=record,
        contact=contact,
        status=Enrollment.Status.SENT,
        current_step=1,
        credential=credential,
        dispatched_at=sent_at,
        sent_at=sent_at,
        next_send_at=now + timedelta(days=1),
    )
    outgoing = message_build(
        credential=credential,
        campaign=record,
        step=record.steps.get(position=1),
        enrollment=enrollment,
        thread=[],
        first_subject="",
        now=sent_at,
    )
    message = Message.objects.create(
        account=record.account,
        enrollment=enrollment,
        credential=credential,
        step=1,
        message_id=outgoing.message_id,
        to_email=outgoing.to_email,
        subject=outgoing.subject,
        text=outgoing.text,
        variant=outgoing.variant,
        sent_at=sent_at,
    )
    return enrollment, message, outgoing.data
