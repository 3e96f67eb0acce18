"""Messages as they land in a sender's INBOX: replies, auto-replies, delivery reports."""

from email.message import EmailMessage
from email.utils import format_datetime

from django.utils import timezone


def reply(
    *,
    sender: str,
    to: str,
    subject: str = "Re: Hello",
    in_reply_to: str | None = None,
    references: list[str] | None = None,
    headers: dict | None = None,
    body: str = "Sounds good, let's talk next week.",
    date=None,
) -> bytes:
    message = EmailMessage()
    message["From"] = f"Contact <{sender}>"
    message["To"] = to
    message["Subject"] = subject
    message["Date"] = format_datetime(date or timezone.now())
    message["Message-ID"] = f"<reply-{timezone.now().timestamp()}-{id(message)}@client.example>"
    if in_reply_to:
        message["In-Reply-To"] = f"<{in_reply_to}>"
    if references:
        message["References"] = " ".join(f"<{r}>" for r in references)
    for name, value in (headers or {}).items():
        message[name] = value
    message.set_content(body)
    return bytes(message)


def delivery_report(
    *,
    to: str,
    original_message_id: str,
    recipient: str,
    status: str = "5.1.1",
    diagnostic: str = "smtp; 550 5.1.1 <{recipient}>: Recipient address rejected: User unknown",
    attach: str = "headers",
) -> bytes:
    """An RFC 3464 report as Postfix writes it: a human part, message/delivery-status,
    and the original's headers (text/rfc822-headers) or whole message (message/rfc822)."""
    boundary = "=_report_boundary_42"
    action = "failed" if status.startswith("5") else "delayed"
    diagnostic = diagnostic.format(recipient=recipient)
    original = (
        f"From: Sender <{to}>\r\nTo: {recipient}\r\nSubject: Hello\r\n"
        f"Message-ID: <{original_message_id}>\r\n"
    )
    attached_type = "text/rfc822-headers" if attach == "headers" else "message/rfc822"
    attached = original if attach == "headers" else original + "\r\nHello there\r\n"
    return (
        "From: MAILER-DAEMON@mx.receiver.example (Mail Delivery System)\r\n"
        f"To: {to}\r\n"
        "Subject: Undelivered Mail Returned to Sender\r\n"
        f"Date: {format_datetime(timezone.now())}\r\n"
        "Auto-Submitted: auto-replied\r\n"
        "MIME-Version: 1.0\r\n"
        f'Content-Type: multipart/report; report-type=delivery-status; boundary="{boundary}"\r\n'
        f"Message-ID: <dsn-{original_message_id}>\r\n"
        "\r\n"
        f"--{boundary}\r\n"
        "Content-Type: text/plain; charset=us-ascii\r\n\r\n"
        "I'm sorry to have to inform you that your message could not be delivered.\r\n\r\n"
        f"--{boundary}\r\n"
        "Content-Type: message/delivery-status\r\n\r\n"
        "Reporting-MTA: dns; mx.receiver.example\r\n"
        "Arrival-Date: Sat, 21 Nov 2026 10:00:00 +0000\r\n\r\n"
        f"Final-Recipient: rfc822; {recipient}\r\n"
        f"Original-Recipient: rfc822;{recipient}\r\n"
        f"Action: {action}\r\n"
        f"Status: {status}\r\n"
        f"Remote-MTA: dns; mx.receiver.example\r\n"
        f"Diagnostic-Code: {diagnostic}\r\n\r\n"
        f"--{boundary}\r\n"
        f"Content-Type: {attached_type}\r\n\r\n"
        f"{attached}\r\n"
        f"--{boundary}--\r\n"
    ).encode()
