"""Who may change state by mail (docs/intake.md): a reply matched by its From alone counts
only with the receiving server's aligned DMARC pass; a delivery report only for the
recipient of the message it names."""

import email
import email.policy
from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.intake.authentication import (
    ANY_AUTHSERV_ID,
    authentication_results_parse,
    dmarc_aligned_pass,
    mailbox_authserv_id,
)
from outreach.intake.inbound import Match, Outcome, message_match
from outreach.models.campaigns import Campaign
from outreach.models.conversations import Reply
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import CredentialCampaignStats, Enrollment
from tests.intake.conftest import requires_dovecot
from tests.intake.factories import first_message, sent_enrollment
from tests.intake.helpers import events
from tests.intake.mail import (
    delivered,
    delivery_report,
    fastmail_results,
    gmail_results,
    outlook_results,
    reply,
)
from tests.intake.test_mailbox import poll, with_imap
from tests.outreach.factories import ContactFactory

DOMAIN = "client.example"


def _message(raw: bytes):
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def _unfolded(value: str) -> str:
    return " ".join(value.split())  # the sender's header, as the email package writes one


def _from_client(authentication_results: str | None, *, below: str | None = None) -> bytes:
    """A message from ada@client.example as delivered; `below`: an Authentication-Results
    header the sender wrote into the message itself."""
    headers = {"Authentication-Results": _unfolded(below)} if below is not None else None
    raw = reply(sender=f"ada@{DOMAIN}", to="me@sender.example", headers=headers)
    return delivered(raw, authentication_results=authentication_results)


# --- the receiving server's verdict (no database) ------------------------------------------

GMAIL, MICROSOFT, FASTMAIL = "mx.google.com", ANY_AUTHSERV_ID, "messagingengine.com"


@pytest.mark.parametrize(
    ("results", "authserv_id"),
    [
        (gmail_results(DOMAIN), GMAIL),
        (outlook_results(DOMAIN), MICROSOFT),
        (fastmail_results(DOMAIN), FASTMAIL),
        (gmail_results(DOMAIN.upper()), GMAIL),
    ],
)
def test_an_aligned_dmarc_pass_of_the_big_providers_is_read(results, authserv_id):
    assert dmarc_aligned_pass(_message(_from_client(results)), authserv_id=authserv_id) is True


@pytest.mark.parametrize(
    ("results", "below", "authserv_id"),
    [
        (None, None, GMAIL),  # the server wrote nothing
        (gmail_results(DOMAIN, dmarc="fail"), gmail_results(DOMAIN), GMAIL),  # forged below
        ("mx.google.com; spf=none smtp.mailfrom=client.example", gmail_results(DOMAIN), GMAIL),
        (outlook_results(DOMAIN, dmarc="fail"), outlook_results(DOMAIN), MICROSOFT),
        (fastmail_results(DOMAIN, dmarc="none"), fastmail_results(DOMAIN), FASTMAIL),
        (gmail_results("evil.example"), None, GMAIL),  # a pass, for another domain
        (gmail_results(f"mail.{DOMAIN}"), None, GMAIL),  # a subdomain is another domain
        (gmail_results(DOMAIN, dmarc="bestguesspass"), None, GMAIL),
        # What a comment says is not a result.
        ("mx.google.com; dmarc=fail (was dmarc=pass header.from=client.example)", None, GMAIL),
        # Another server's header on top: not the mailbox's.
        (gmail_results(DOMAIN, authserv_id="mx.evil.example"), None, GMAIL),
        # An unknown mailbox server: a header on top may be the sender's own.
        (None, gmail_results(DOMAIN), ""),
        (gmail_results(DOMAIN), None, ""),
    ],
)
def test_nothing_else_is_an_aligned_pass(results, below, authserv_id):
    message = _message(_from_client(results, below=below))
    assert dmarc_aligned_pass(message, authserv_id=authserv_id) is False


def test_two_from_addresses_are_never_aligned():
    raw = _from_client(gmail_results(DOMAIN)).replace(
        b"From: Contact <ada@client.example>",
        b"From: Contact <ada@client.example>, Eve <eve@evil.example>",
    )
    assert dmarc_aligned_pass(_message(raw), authserv_id=GMAIL) is False


def test_an_authserv_id_names_its_hosts():
    assert dmarc_aligned_pass(
        _message(_from_client(gmail_results(DOMAIN))), authserv_id="google.com"
    )
    fastmail = _message(_from_client(fastmail_results(DOMAIN)))
    assert dmarc_aligned_pass(fastmail, authserv_id="mx6.messagingengine.com")
    assert not dmarc_aligned_pass(fastmail, authserv_id="mx1.messagingengine.com")
    assert not dmarc_aligned_pass(fastmail, authserv_id="engine.com")


def test_whose_header_a_mailbox_believes():
    assert mailbox_authserv_id(imap_authserv_id="mx.example.net", imap_host="imap.gmail.com") == (
        "mx.example.net"
    )
    assert mailbox_authserv_id(imap_authserv_id="", imap_host="IMAP.gmail.com") == GMAIL
    assert mailbox_authserv_id(imap_authserv_id="", imap_host="outlook.office365.com") == "*"
    assert mailbox_authserv_id(imap_authserv_id="", imap_host="imap.fastmail.com") == FASTMAIL
    assert mailbox_authserv_id(imap_authserv_id="", imap_host="mail.example.net") == ""


def test_the_header_is_read_as_rfc_8601_writes_it():
    parsed = authentication_results_parse(
        'mx.example.org 1; dkim/1 = pass (good; header.from=x) header.d="client.example";'
        " dmarc=pass (p=none) header.from = Client.Example; none"
    )
    assert parsed.authserv_id == "mx.example.org"
    assert [(r.method, r.result) for r in parsed.results] == [("dkim", "pass"), ("dmarc", "pass")]
    assert parsed.results[0].properties == {"header.d": "client.example"}
    assert parsed.results[1].properties == {"header.from": "Client.Example"}
    assert authentication_results_parse(outlook_results(DOMAIN)).authserv_id == ""


# --- message_match: what a mailbox message is matched to ----------------------------------


@pytest.fixture
def contact_thread(account):
    """ada@client.example, sent step 1 an hour ago (the API client's account)."""
    contact = ContactFactory(account=account, email=f"ada@{DOMAIN}")
    return sent_enrollment(account=account, contact=contact)


def _match(enrollment, raw: bytes):
    credential = SmtpCredential.objects.get(pk=enrollment.credential_id)
    return message_match(credential=credential, uid=1, raw=raw, fetch_full=lambda: raw)


@pytest.mark.django_db
def test_thread_headers_verify_the_sender_without_any_authentication_header(contact_thread):
    raw = reply(
        sender=f"ada@{DOMAIN}",
        to="me@sender.example",
        in_reply_to=first_message(contact_thread).message_id,
    )
    assert _match(contact_thread, raw) == Match(contact_thread, sender_verified=True)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("imap_host", "results", "below", "verified"),
    [
        ("imap.gmail.com", gmail_results(DOMAIN), None, True),
        ("outlook.office365.com", outlook_results(DOMAIN), None, True),
        ("imap.fastmail.com", fastmail_results(DOMAIN), None, True),
        ("imap.gmail.com", None, None, False),
        ("imap.gmail.com", gmail_results(DOMAIN, dmarc="fail"), gmail_results(DOMAIN), False),
        ("imap.gmail.com", gmail_results("evil.example"), None, False),
        ("mail.example.net", gmail_results(DOMAIN), None, False),  # whose header is it?
    ],
)
def test_the_from_fallback_is_verified_only_by_an_aligned_pass(
    contact_thread, imap_host, results, below, verified
):
    SmtpCredential.objects.filter(pk=contact_thread.credential_id).update(imap_host=imap_host)
    matched = _match(contact_thread, _from_client(results, below=below))
    assert matched == Match(contact_thread, sender_verified=verified)


@pytest.mark.django_db
def test_the_mailbox_authserv_id_decides_which_header_counts(contact_thread):
    SmtpCredential.objects.filter(pk=contact_thread.credential_id).update(
        imap_host="mail.example.net", imap_authserv_id="mx.example.net"
    )
    faked = _from_client(gmail_results(DOMAIN))
    assert _match(contact_thread, faked) == Match(contact_thread, sender_verified=False)
    real = _from_client(gmail_results(DOMAIN, authserv_id="mx.example.net"))
    assert _match(contact_thread, real) == Match(contact_thread, sender_verified=True)


@pytest.mark.django_db
def test_a_report_about_another_recipient_is_unmatched(contact_thread):
    raw = delivery_report(
        to="me@sender.example",
        original_message_id=first_message(contact_thread).message_id,
        recipient=f"ada@{DOMAIN}",
        final_recipient="someone@else.example",
        original_recipient="someone@else.example",
    )
    outcome = _match(contact_thread, raw)
    assert isinstance(outcome, Outcome) and outcome.kind == "unmatched"
    assert "someone@else.example" in outcome.detail and "not counted" in outcome.detail
    contact_thread.refresh_from_db()
    assert contact_thread.status == Enrollment.Status.SENT


# --- through a real mailbox (Dovecot) --------------------------------------------------------


@pytest.fixture
def mailbox_thread(imap_mailbox, contact_thread):
    # A local Dovecot stands in for Gmail: the mailbox names its authserv-id.
    credential = with_imap(contact_thread, imap_mailbox, imap_authserv_id="mx.google.com")
    return contact_thread, credential, imap_mailbox


def _forged(enrollment, credential, body: str, **kwargs) -> bytes:
    """What anyone can send: the contact's From, no thread headers, and an
    Authentication-Results header of its own below the server's honest fail."""
    return delivered(
        reply(
            sender=enrollment.contact.email,
            to=credential.from_email,
            subject="Hello",
            body=body,
            headers={"Authentication-Results": _unfolded(gmail_results(DOMAIN))},
            **kwargs,
        ),
        authentication_results=gmail_results(DOMAIN, dmarc="fail"),
    )


@requires_dovecot
@pytest.mark.django_db
def test_a_forged_remove_me_is_kept_unverified_and_unsubscribes_no_one(
    mailbox_thread, api_client, account
):
    enrollment, credential, mailbox = mailbox_thread
    elsewhere = sent_enrollment(account=account, contact=enrollment.contact)
    mailbox.append(_forged(enrollment, credential, "Please remove me from your list."))

    [outcome] = poll(credential).outcomes
    assert outcome.kind == "unverified"
    assert outcome.detail == "sender not verified, kept, changes nothing; label unsubscribe_request"
    enrollment.contact.refresh_from_db()
    assert enrollment.contact.unsubscribed_at is None
    for each in (enrollment, elsewhere):
        each.refresh_from_db()
        assert each.status == Enrollment.Status.SENT and each.replied_at is None
    assert events() == []

    [kept] = Reply.objects.all()
    assert kept.label == "unsubscribe_request" and kept.sender_verified is False
    shown = api_client.get("/replies").json()
    assert [(r["id"], r["sender_verified"]) for r in shown] == [(str(kept.pk), False)]
    thread = api_client.get(
        f"/campaigns/{enrollment.campaign_id}/enrollments/{enrollment.pk}/thread"
    ).json()
    assert [e["reply"]["sender_verified"] for e in thread if e["type"] == "reply"] == [False]


@requires_dovecot
@pytest.mark.django_db
def test_a_forged_out_of_office_does_not_delay_the_next_step(mailbox_thread):
    enrollment, credential, mailbox = mailbox_thread
    next_send_at = enrollment.next_send_at
    back = timezone.now().date() + timedelta(days=300)
    body = f"I am out of the office until {back.strftime('%B')} {back.day}, {back.year}."
    mailbox.append(
        _forged(enrollment, credential, body).replace(
            b"Subject: Hello", b"Subject: Out of Office: Hello"
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["unverified"]
    kept = Reply.objects.get()
    assert (kept.label, kept.returns_on, kept.sender_verified) == ("out_of_office", back, False)
    enrollment.refresh_from_db()
    assert enrollment.next_send_at == next_send_at
    assert events() == []


@requires_dovecot
@pytest.mark.django_db
def test_a_forged_reply_stops_neither_the_contact_nor_its_colleagues(mailbox_thread):
    enrollment, credential, mailbox = mailbox_thread
    Campaign.objects.filter(pk=enrollment.campaign_id).update(stop_on_domain_reply=True)
    colleague = sent_enrollment(
        campaign=enrollment.campaign,
        contact=ContactFactory(account=enrollment.campaign.account, email=f"grace@{DOMAIN}"),
    )
    mailbox.append(_forged(enrollment, credential, "Not now, maybe next quarter."))
    assert [o.kind for o in poll(credential).outcomes] == ["unverified"]
    for each in (enrollment, colleague):
        each.refresh_from_db()
        assert each.status == Enrollment.Status.SENT and each.replied_at is None
    assert events() == []


@requires_dovecot
@pytest.mark.django_db
@pytest.mark.parametrize(
    ("authserv_id", "results"),
    [("mx.google.com", gmail_results(DOMAIN)), ("messagingengine.com", fastmail_results(DOMAIN))],
)
def test_an_authenticated_reply_by_its_from_alone_is_a_reply(mailbox_thread, authserv_id, results):
    enrollment, credential, mailbox = mailbox_thread
    SmtpCredential.objects.filter(pk=credential.pk).update(imap_authserv_id=authserv_id)
    raw = reply(sender=enrollment.contact.email, to=credential.from_email, subject="Hi")
    mailbox.append(delivered(raw, authentication_results=results))
    assert [o.kind for o in poll(credential).outcomes] == ["replied"]
    assert Reply.objects.get().sender_verified is True
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.REPLIED
    [event] = events("enrollment.replied")
    assert event.data["enrollment_id"] == str(enrollment.pk)


@requires_dovecot
@pytest.mark.django_db
@pytest.mark.parametrize("genuine", [False, True])
def test_only_reports_about_our_recipient_count_toward_disabling_the_mailbox(imap_mailbox, genuine):
    """Two bounces over 20 sends pass the campaign's 5%: the mailbox is disabled and the
    campaign paused, unless the reports name someone else."""
    first = sent_enrollment()
    second = sent_enrollment(campaign=first.campaign)
    credential = with_imap(first, imap_mailbox)
    CredentialCampaignStats.objects.update_or_create(
        credential=credential, campaign=first.campaign, defaults={"sends": 20}
    )
    for enrollment in (first, second):
        # The recipients' own postmaster knows the Message-IDs: it received them.
        imap_mailbox.append(
            delivery_report(
                to=credential.from_email,
                original_message_id=first_message(enrollment).message_id,
                recipient=enrollment.contact.email,
                final_recipient=None if genuine else "postmaster@example.org",
                original_recipient=None if genuine else "postmaster@example.org",
            )
        )
    outcomes = poll(credential).outcomes
    credential.refresh_from_db()
    first.campaign.refresh_from_db()
    first.contact.refresh_from_db()
    if genuine:
        assert [o.kind for o in outcomes] == ["bounced", "bounced"]
        assert credential.disabled_at is not None
        assert first.campaign.status == Campaign.Status.PAUSED
        return
    assert [o.kind for o in outcomes] == ["unmatched", "unmatched"]
    assert all("postmaster@example.org" in o.detail for o in outcomes)
    assert credential.disabled_at is None and credential.bounced_count == 0
    assert first.campaign.status == Campaign.Status.ACTIVE
    assert first.contact.bounced_at is None
    assert events() == []


@requires_dovecot
@pytest.mark.django_db
def test_a_report_naming_our_recipient_as_its_original_recipient_counts(mailbox_thread):
    """An alias expanded on the way: the Final-Recipient is the mailbox it led to, the
    Original-Recipient the address the service wrote to."""
    enrollment, credential, mailbox = mailbox_thread
    mailbox.append(
        delivery_report(
            to=credential.from_email,
            original_message_id=first_message(enrollment).message_id,
            recipient=enrollment.contact.email,
            final_recipient="ada.lovelace@mailhost.client.example",
        )
    )
    assert [o.kind for o in poll(credential).outcomes] == ["bounced"]
    enrollment.refresh_from_db()
    assert enrollment.status == Enrollment.Status.BOUNCED
