"""Message building: the MIME message of one step for one enrollment."""

import contextlib
import uuid
from dataclasses import dataclass
from datetime import datetime
from email.headerregistry import Address
from email.message import EmailMessage
from email.utils import format_datetime, formataddr
from html import escape
from typing import Any
from uuid import UUID

from django.conf import settings

from outreach.campaigns import clicks
from outreach.campaigns.rendering import (
    UNSUBSCRIBE_URL,
    contact_values,
    places_variable,
    template_render,
    unsubscribe_footer_html,
    unsubscribe_footer_text,
)
from outreach.campaigns.tracking import tracking_base_url
from outreach.campaigns.variants import DEFAULT as DEFAULT_VARIANT
from outreach.campaigns.variants import step_content, stored_letter
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message
from outreach.sending import tokens
from outreach.sending.mime import (
    SharingHeaderFactory,
    SharingPolicy,
    message_bytes,
    message_bytes_fast,
)

# Fold headers only past RFC 5322's 998-character line limit. The default 78 makes
# Python encode long unstructured headers as RFC 2047 words, which breaks
# List-Unsubscribe: its URLs must stay plain for mail clients to find them.
# Same settings as SMTP.clone(max_line_length=998), with the header sharing of
# outreach.sending.mime (the same bytes, less work per message).
SMTP_POLICY = SharingPolicy(
    linesep="\r\n", max_line_length=998, header_factory=SharingHeaderFactory()
)
SMTPUTF8_POLICY = SMTP_POLICY.clone(utf8=True)


# --- the message ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Outgoing:
    message_id: str  # without brackets
    subject: str
    data: bytes
    to_email: str  # the envelope recipient (domain in IDNA form)
    # A non-ASCII local part can only travel with SMTPUTF8 (RFC 6531).
    needs_smtputf8: bool = False
    variant: str = DEFAULT_VARIANT  # the step's A/B variant it carries
    # The plain text part as sent, cut at REPLY_BODY_MAX_CHARS (the thread shows it).
    text: str = ""


def ascii_address(address: str) -> str | None:
    """The address with its domain in IDNA (ASCII) form, as the envelope needs it; None
    when the local part itself is not ASCII."""
    local, _, domain = address.rpartition("@")
    if not local.isascii():
        return None
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        return None
    return f"{local}@{domain}"


def _before_body_end(html: str, fragment: str) -> str:
    """The HTML with `fragment` inserted before its closing body tag (or at its end)."""
    index = html.lower().rfind("</body>")
    if index == -1:
        return html + fragment
    return html[:index] + fragment + html[index:]


# The open pixel as the background of a 1x1 table, not an <img>: spam filters score a
# remote <img> in a message of little text as an image-only message (SpamAssassin's
# HTML_IMAGE_ONLY_* rules, 0.6 to 2.8 points below 3,200 characters of text, and
# LONG_INVISIBLE_TEXT for a hidden one); a background costs nothing there
# (docs/deliverability.md, "What open tracking costs"; bench/spam_scores.py measures it).
PIXEL_HTML = (
    '<table role="presentation" width="1" height="1" cellpadding="0" cellspacing="0"'
    ' border="0" background="{url}"><tr><td></td></tr></table>'
)


def message_build(
    *,
    credential: SmtpCredential,
    campaign: Campaign,
    step: CampaignStep,
    enrollment: Enrollment,
    thread: list[Message],
    first_subject: str,
    now: datetime,
    variant: str = DEFAULT_VARIANT,
) -> Outgoing:
    """The email of one step's A/B `variant` (docs/outreach.md). `thread`: the
    enrollment's earlier messages, oldest first; a step with an empty subject replies
    to the last of them."""
    contact = enrollment.contact
    content = step_content(step, variant)
    # The link names the contact too: it must work after the campaign is deleted.
    unsubscribe = tokens.token_make(
        purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk, contact_id=enrollment.contact_id
    )
    unsubscribe_url = f"{settings.BASE_URL}/u/{unsubscribe}"
    values = {**contact_values(contact), UNSUBSCRIBE_URL: unsubscribe_url}
    message_id = message_id_make(credential)

    name = f"{contact.first_name} {contact.last_name}"
    headers, recipient = address_headers(credential, name, contact.email)
    subject, thread_headers = _subject(content.subject, values, thread, first_subject)
    headers += thread_headers
    headers += (
        ("Subject", subject),
        ("Date", format_datetime(now)),
        ("Message-ID", f"<{message_id}>"),
        (
            "List-Unsubscribe",
            f"<{unsubscribe_url}>, <mailto:{credential.from_email}?subject=unsubscribe>",
        ),
        ("List-Unsubscribe-Post", "List-Unsubscribe=One-Click"),
        ("X-Auto-Response-Suppress", "OOF, AutoReply"),
    )
    text, html = _bodies(campaign, content, values, enrollment, unsubscribe_url, step)
    if campaign.track_clicks:
        text, html = _links_tracked(
            text,
            html,
            base=tracking_base_url(campaign.account),
            enrollment=enrollment,
            step=step.position,
            variant=variant,
            unsubscribe_url=unsubscribe_url,
        )
    data = message_data(headers, text, html, smtputf8=recipient is None)
    return Outgoing(
        message_id=message_id,
        subject=subject,
        data=data,
        to_email=recipient or contact.email,
        needs_smtputf8=recipient is None,
        variant=variant,
        text=text[: settings.REPLY_BODY_MAX_CHARS],
    )


def message_id_make(credential: SmtpCredential) -> str:
    """A new Message-ID (without brackets) on the mailbox's domain (in IDNA form when it
    has one)."""
    domain = credential.from_email.rsplit("@", 1)[-1]
    with contextlib.suppress(UnicodeError):
        domain = domain.encode("idna").decode("ascii")
    return f"{uuid.uuid4().hex}@{domain}"


def address_headers(
    credential: SmtpCredential, name: str, address: str
) -> tuple[list[tuple[str, Any]], str | None]:
    """The From header (the mailbox) and the To header (`name` <`address`>), and the
    recipient's address when it is ASCII (None when it needs SMTPUTF8). Display names
    lose their line breaks: a name cannot add a header. Steps and responses to replies
    (outreach.conversations.respond) share it."""
    headers: list[tuple[str, Any]] = [
        ("From", _mailbox(" ".join(credential.from_name.split()), credential.from_email))
    ]
    name = " ".join(name.split())
    recipient = ascii_address(address)
    if recipient is not None:
        headers.append(("To", _mailbox(name, recipient)))
    else:  # SMTPUTF8: the header carries the address as UTF-8
        local, _, domain = address.rpartition("@")
        headers.append(("To", Address(display_name=name, username=local, domain=domain)))
    return headers, recipient


def _mailbox(name: str, address: str) -> Any:
    """`name` <`address`> for a From or To header: formataddr's string for an ASCII name
    (quoted when it holds a special); for a non-ASCII name, an Address, which the email
    package writes as one encoded word holding the name's specials. formataddr's string
    for such a name ("=?utf-8?...?=") is refolded by the email package with a special
    left outside the encoded word, where a reader takes "Sam Sénder, Inc." for two
    addresses and "re: José" for a group."""
    if name.isascii():
        return formataddr((name, address))
    return Address(display_name=name, addr_spec=address)


def _subject(
    template: str, values: dict, thread: list[Message], first_subject: str
) -> tuple[str, list[tuple[str, Any]]]:
    """The subject, and the headers of the thread it replies in: an empty subject
    replies ("Re: ") to the thread's last message, or to `first_subject` without one."""
    if template.strip():
        return template_render(template, values, kind="header"), []
    previous = thread[-1].subject if thread else first_subject
    if not thread:
        return reply_subject(previous), []
    return reply_subject(previous), [
        ("In-Reply-To", f"<{thread[-1].message_id}>"),
        ("References", " ".join(f"<{m.message_id}>" for m in thread)),
    ]


def reply_subject(subject: str) -> str:
    """`Re: <subject>`, without stacking: the "Re:" prefixes it has already (any case,
    with or without the space) are dropped first."""
    while subject[:3].lower() == "re:":
        subject = subject[3:].lstrip(" ")
    return f"Re: {subject}"


def _bodies(
    campaign: Campaign,
    content,
    values: dict,
    enrollment: Enrollment,
    unsubscribe_url: str,
    step: CampaignStep,
) -> tuple[str, str | None]:
    """The text body and the HTML one (None without HTML), rendered, with the
    unsubscribe footer and the open pixel (naming the step's position, API.md 17: each
    message's opens are its own) as the campaign asks."""
    # The footer goes to each part that does not place the link itself.
    footer = campaign.unsubscribe_footer
    text = template_render(content.body_text, values, kind="text")
    if footer and not places_variable(content.body_text, UNSUBSCRIBE_URL):
        text = unsubscribe_footer_text(text, unsubscribe_url)
    if not content.body_html.strip():
        return text, None
    html = template_render(content.body_html, values, kind="html")
    if footer and not places_variable(content.body_html, UNSUBSCRIBE_URL):
        html = _before_body_end(html, unsubscribe_footer_html(unsubscribe_url))
    if campaign.track_opens:
        token = tokens.token_make(
            purpose=tokens.OPEN,
            enrollment_id=enrollment.pk,
            step=getattr(step, "position", None),
        )
        pixel_url = f"{tracking_base_url(campaign.account)}/t/o/{token}.gif"
        html = _before_body_end(html, PIXEL_HTML.format(url=escape(pixel_url, quote=True)))
    return text, html


def _links_tracked(
    text: str,
    html: str | None,
    *,
    base: str,
    enrollment: Enrollment,
    step: int,
    variant: str,
    unsubscribe_url: str,
) -> tuple[str, str | None]:
    """The bodies with their links through the click redirect on `base` (the tracking
    host; outreach.campaigns.clicks); the unsubscribe link and the open pixel are not
    links and stay."""

    def link_for(url: str) -> str:
        token = clicks.click_token_make(
            enrollment_id=enrollment.pk, step=step, variant=variant, url=url
        )
        return f"{base}/t/c/{token}"

    keep = frozenset({unsubscribe_url})
    text = clicks.text_links_track(text, link_for=link_for, keep=keep)
    if html is not None:
        html = clicks.html_links_track(html, link_for=link_for, keep=keep)
    return text, html


def message_data(headers: list, text: str, html: str | None, *, smtputf8: bool) -> bytes:
    """The message's bytes: `headers` in order, a text part and, with `html`, an HTML
    alternative, under the sending policy (SMTP_POLICY). The common case written
    directly (byte for byte what the email package writes, outreach.sending.mime);
    anything else, and SMTPUTF8, through the email package. Steps and responses to
    replies share it."""
    if not smtputf8:
        data = message_bytes_fast(headers, text, html, policy=SMTP_POLICY)
        if data is not None:
            return data
    msg = EmailMessage(policy=SMTP_POLICY)
    for header, value in headers:
        msg[header] = value
    msg.set_content(text)
    if html is not None:
        msg.add_alternative(html, subtype="html")
    return message_bytes(msg, policy=SMTPUTF8_POLICY if smtputf8 else SMTP_POLICY)


def thread_messages(claims: list, steps: dict, variants: dict) -> dict[UUID, list[Message]]:
    """The earlier messages, oldest first, of each claim (SendClaim) whose message is a
    reply (its step variant's subject is empty: message_build), by enrollment; loaded
    for replies alone, the only messages they matter to. A claim of any other message
    has no entry."""
    threads: dict[UUID, list[Message]] = {}
    for claim in claims:
        step = steps[claim.enrollment.campaign_id].get(claim.step)
        if (
            step is not None
            and not step_content(step, variants[claim.enrollment_id]).subject.strip()
        ):
            threads[claim.enrollment_id] = []
    if threads:
        for message in Message.objects.filter(enrollment_id__in=list(threads)).order_by(
            "step", "sent_at"
        ):
            threads[message.enrollment_id].append(message)
    return threads


def first_subject(steps: dict[int, CampaignStep], enrollment: Enrollment) -> str:
    """The subject step 1 had for this enrollment (its variant's)."""
    first = steps.get(1)
    if first is None:
        return ""
    subject = step_content(first, stored_letter(enrollment, 1)).subject
    return template_render(subject, contact_values(enrollment.contact), kind="header")
