"""The mail a simulator mailbox receives back (docs/sandbox.md, "Outcomes"): real RFC 5322
messages, written as a contact's mail client or a receiving server would write them, for
the intake to read as it reads a polled mailbox. Nothing here decides what they do: the
intake's own parser, matcher and labels do.

- `recipient_outcome`: the outcome an address asks for (`ada+reply@simulator.test`);
- `contact_message`: the contact's answer to a sent message (a reply, an out-of-office
  notice, an auto-reply, a request to be removed), threaded to it, quoting it;
- `delivery_report`: the receiving server's delivery status report (RFC 3464) of a
  permanent failure, 5.1.1, naming the sent message.

Each message's Message-ID is made from the sent message's id and the outcome, so the
same outcome made twice is the same message, which the intake keeps once.
"""

from datetime import UTC, date, datetime, timedelta
from email.message import EmailMessage
from email.policy import SMTP
from email.utils import format_datetime, formataddr

from outreach.emails import SIMULATOR_DOMAIN, simulator_outcome
from outreach.models.sending import Message
from outreach.sending.message import reply_subject

OPEN = "open"
CLICK = "click"
REPLY = "reply"
OUT_OF_OFFICE = "ooo"
AUTO_REPLY = "autoreply"
REMOVE = "remove"
DSN = "dsn"
COMPLAINT = "complaint"
# What a simulator's message provokes after it was accepted (the others are answered at
# the SMTP stage, or are plain deliveries).
LATER_OUTCOMES = (OPEN, CLICK, REPLY, OUT_OF_OFFICE, AUTO_REPLY, REMOVE, DSN, COMPLAINT)

# An out-of-office notice returns this many days after the send's UTC date.
OUT_OF_OFFICE_DAYS = 7

_BODIES = {
    REPLY: (
        "Thanks for reaching out, this sounds interesting.\n\n"
        "Could we talk next week? Tuesday or Wednesday afternoon works for me.\n\n"
        "{first_name}"
    ),
    OUT_OF_OFFICE: (
        "Thank you for your email. I am out of the office with limited access to email "
        "and will be back on {returns}.\n\n{first_name}"
    ),
    AUTO_REPLY: (
        "Thank you for your message. This is an automatic reply: it has been received "
        "and will be answered as soon as possible.\n\n{first_name}"
    ),
    REMOVE: "Please remove me from your list.\n\n{first_name}",
}


def recipient_outcome(address: str) -> str:
    """The outcome an address at simulator.test asks for (`ada+reply@simulator.test`:
    "reply"; outreach.emails.simulator_outcome, the one reading of an address that the
    simulated SMTP server answers by too); "" for any other address."""
    return simulator_outcome(address.strip()) or ""


def out_of_office_return(sent_at: datetime) -> date:
    """The return date a simulated out-of-office notice gives: the UTC date of the send,
    OUT_OF_OFFICE_DAYS later."""
    return sent_at.astimezone(UTC).date() + timedelta(days=OUT_OF_OFFICE_DAYS)


def simulated_message_id(message: Message, outcome: str) -> str:
    """The Message-ID (without brackets) of the mail an outcome of `message` makes."""
    return f"{outcome}-{message.pk.hex}@{SIMULATOR_DOMAIN}"


def _quoted(message: Message, sender: str) -> str:
    """The sent message quoted as a mail client quotes it under a reply."""
    said = f"On {format_datetime(message.sent_at)}, {sender} wrote:"
    lines = (message.text or "").splitlines() or [""]
    return said + "\n\n" + "\n".join(f"> {line}".rstrip() for line in lines)


def contact_message(*, message: Message, outcome: str, now: datetime) -> bytes:
    """The contact's mail answering `message` (outcome reply, ooo, autoreply or remove):
    From the contact, To the mailbox, `Re:` its subject, In-Reply-To and References its
    Message-ID, dated `now`, the sent text quoted below. A notice (out-of-office,
    auto-reply) is marked automatic as servers mark theirs (RFC 3834 Auto-Submitted)."""
    enrollment = message.enrollment
    contact = enrollment.contact
    credential = message.credential
    name = " ".join(f"{contact.first_name} {contact.last_name}".split())
    mailbox = formataddr((credential.from_name, credential.from_email)) if credential else ""
    body = _BODIES[outcome].format(
        first_name=contact.first_name or name or "",
        returns=_spoken(out_of_office_return(message.sent_at)),
    )
    mail = EmailMessage(policy=SMTP)
    mail["From"] = formataddr((name, message.to_email))
    mail["To"] = mailbox
    if outcome == OUT_OF_OFFICE:
        mail["Subject"] = f"Automatic reply: {message.subject}"
    elif outcome == AUTO_REPLY:
        mail["Subject"] = f"Auto: {message.subject}"
    else:
        mail["Subject"] = reply_subject(message.subject)
    mail["Date"] = format_datetime(now)
    mail["Message-ID"] = f"<{simulated_message_id(message, outcome)}>"
    mail["In-Reply-To"] = f"<{message.message_id}>"
    mail["References"] = f"<{message.message_id}>"
    if outcome in (OUT_OF_OFFICE, AUTO_REPLY):
        mail["Auto-Submitted"] = "auto-replied"
    mail.set_content(body + "\n\n" + _quoted(message, mailbox or "you") + "\n")
    return mail.as_bytes()


def delivery_report(*, message: Message, now: datetime) -> bytes:
    """The receiving server's report that `message` could not be delivered to its
    recipient (5.1.1, the address does not exist), as Postfix writes one: a human part,
    the message/delivery-status part, and the sent message's headers."""
    credential = message.credential
    mailbox = credential.from_email if credential else ""
    recipient = message.to_email
    boundary = f"=_report_{message.pk.hex}"
    original = (
        f"From: {mailbox}\r\nTo: {recipient}\r\nSubject: {message.subject}\r\n"
        f"Date: {format_datetime(message.sent_at)}\r\n"
        f"Message-ID: <{message.message_id}>\r\n"
    )
    return (
        f"From: MAILER-DAEMON@mx.{SIMULATOR_DOMAIN} (Mail Delivery System)\r\n"
        f"To: {mailbox}\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        f"Date: {format_datetime(now)}\r\n"
        "Auto-Submitted: auto-replied\r\n"
        "MIME-Version: 1.0\r\n"
        "Content-Type: multipart/report; report-type=delivery-status;\r\n"
        f'\tboundary="{boundary}"\r\n'
        f"Message-ID: <{simulated_message_id(message, DSN)}>\r\n"
        "\r\n"
        f"--{boundary}\r\n"
        "Content-Description: Notification\r\n"
        "Content-Type: text/plain; charset=us-ascii\r\n\r\n"
        f"This is the mail system at host mx.{SIMULATOR_DOMAIN}.\r\n\r\n"
        "I'm sorry to have to inform you that your message could not\r\n"
        "be delivered to one or more recipients.\r\n\r\n"
        f"<{recipient}>: host mx.{SIMULATOR_DOMAIN} said: 550 5.1.1 <{recipient}>:\r\n"
        "    Recipient address rejected: User unknown\r\n\r\n"
        f"--{boundary}\r\n"
        "Content-Description: Delivery report\r\n"
        "Content-Type: message/delivery-status\r\n\r\n"
        f"Reporting-MTA: dns; mx.{SIMULATOR_DOMAIN}\r\n"
        f"Original-Message-ID: <{message.message_id}>\r\n"
        f"Arrival-Date: {format_datetime(message.sent_at)}\r\n\r\n"
        f"Final-Recipient: rfc822; {recipient}\r\n"
        f"Original-Recipient: rfc822;{recipient}\r\n"
        "Action: failed\r\n"
        "Status: 5.1.1\r\n"
        f"Remote-MTA: dns; mx.{SIMULATOR_DOMAIN}\r\n"
        f"Diagnostic-Code: smtp; 550 5.1.1 <{recipient}>: Recipient address rejected:\r\n"
        "    User unknown\r\n\r\n"
        f"--{boundary}\r\n"
        "Content-Description: Undelivered Message Headers\r\n"
        "Content-Type: text/rfc822-headers\r\n\r\n"
        f"{original}\r\n"
        f"--{boundary}--\r\n"
    ).encode()


def _spoken(day: date) -> str:
    """A date as a notice writes it: "Saturday, 5 December 2026" (English names, so the
    same in every locale)."""
    return f"{_WEEKDAYS[day.weekday()]}, {day.day} {_MONTHS[day.month - 1]} {day.year}"


_WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")
_MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
