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


def delivered(raw: bytes, *, authentication_results: str | None = None) -> bytes:
    """`raw` as the receiving server leaves it in the INBOX: its Received header and (when
    given) its Authentication-Results prepended above everything the sender wrote."""
    added = "Received: from mail-sor-f41.google.com (mail-sor-f41.google.com. [209.85.220.41])\n"
    added += "        by mx.google.com with SMTPS id a1sor; Sat, 28 Nov 2026 10:00:00 -0800\n"
    if authentication_results is not None:
        added += f"Authentication-Results: {authentication_results}\n"
    return added.encode() + raw


def delivery_report(
    *,
    to: str,
    original_message_id: str,
    recipient: str,
    status: str = "5.1.1",
    diagnostic: str = "smtp; 550 5.1.1 <{recipient}>: Recipient address rejected: User unknown",
    attach: str = "headers",
    final_recipient: str | None = None,
    original_recipient: str | None = None,
) -> bytes:
    """An RFC 3464 report as Postfix writes it: a human part, message/delivery-status,
    and the original's headers (text/rfc822-headers) or whole message (message/rfc822).
    `recipient` is the original's To and, unless given apart, the report's
    Final-Recipient and Original-Recipient."""
    final_recipient = final_recipient or recipient
    original_recipient = original_recipient or recipient
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
        f"Final-Recipient: rfc822; {final_recipient}\r\n"
        f"Original-Recipient: rfc822;{original_recipient}\r\n"
        f"Action: {action}\r\n"
        f"Status: {status}\r\n"
        f"Remote-MTA: dns; mx.receiver.example\r\n"
        f"Diagnostic-Code: {diagnostic}\r\n\r\n"
        f"--{boundary}\r\n"
        f"Content-Type: {attached_type}\r\n\r\n"
        f"{attached}\r\n"
        f"--{boundary}--\r\n"
    ).encode()


# Authentication-Results values as the big mailbox providers write them (folded as they
# fold them), for a message whose From domain is `domain`.


def gmail_results(domain: str, *, dmarc: str = "pass", authserv_id: str = "mx.google.com") -> str:
    spf = "pass" if dmarc == "pass" else "fail"
    return (
        f"{authserv_id};\n"
        f"       dkim=pass header.i=@{domain} header.s=20230601 header.b=Zx9kQ2ab;\n"
        f"       spf={spf} (google.com: domain of ada@{domain} designates 209.85.220.41 as "
        f"permitted sender) smtp.mailfrom=ada@{domain};\n"
        f"       dmarc={dmarc} (p=NONE sp=NONE dis=NONE) header.from={domain}"
    )


def outlook_results(domain: str, *, dmarc: str = "pass") -> str:
    """Microsoft 365 and Outlook.com write no authserv-id."""
    return (
        "spf=pass (sender IP is 209.85.220.41)\n"
        f" smtp.mailfrom={domain}; dkim=pass (signature was verified)\n"
        f" header.d={domain};dmarc={dmarc} action=none\n"
        f" header.from={domain};compauth=pass reason=100"
    )


def fastmail_results(domain: str, *, dmarc: str = "pass") -> str:
    return (
        "mx6.messagingengine.com;\n"
        f"    dkim=pass (2048-bit rsa key sha256) header.d={domain} header.i=@{domain}\n"
        "      header.b=Kx2a9ZQe header.a=rsa-sha256 header.s=google x-bits=2048;\n"
        f"    dmarc={dmarc} policy.published-domain-policy=none\n"
        "      policy.applied-disposition=none policy.evaluated-disposition=none\n"
        f"      (p=none,d=none,d.eval=none) policy.policy-from=p header.from={domain};\n"
        "    iprev=pass smtp.remote-ip=209.85.128.52 (mail-wm1-f52.google.com);\n"
        f"    spf=pass smtp.mailfrom=ada@{domain} smtp.helo=mail-wm1-f52.google.com"
    )
