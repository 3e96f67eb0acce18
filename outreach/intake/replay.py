"""Mail handed to a simulator mailbox by hand (POST /smtp_credentials/:id/inbound,
docs/sandbox.md, "Replaying a message"): a whole RFC 5322 message taken by the intake
as a poll of the mailbox would take it (outreach.intake.mailbox.message_take).

A message without a Message-ID is known by a digest of its bytes, so the same bytes
posted twice are kept once, as the same message polled twice is.
"""

import email
import email.policy
import hashlib

from outreach.intake.mailbox import message_take
from outreach.intake.selectors import message_id_normalize
from outreach.models.mailboxes import SmtpCredential


def inbound_message_id(raw: bytes) -> str | None:
    """The Message-ID a message gives itself (without brackets), or None."""
    end = raw.find(b"\r\n\r\n")
    end = raw.find(b"\n\n") if end < 0 else end
    header = raw if end < 0 else raw[:end]
    parsed = email.message_from_bytes(header, policy=email.policy.compat32)
    return message_id_normalize(parsed.get("Message-ID")) or None


def inbound_message_take(*, credential_id: str, raw: bytes) -> str:
    """Take a posted message into the simulator mailbox `credential_id`; what the
    intake made of it, in words (the task logs it). A mailbox deleted since: nothing."""
    credential = SmtpCredential.objects.filter(
        pk=credential_id, auth_method=SmtpCredential.AuthMethod.SIMULATOR
    ).first()
    if credential is None:
        return "mailbox gone"
    fallback = f"inbound-{hashlib.sha256(raw).hexdigest()[:40]}@{credential.pk}"
    taken = message_take(credential=credential, raw=raw, fallback_id=fallback)
    return f"{taken.kind} {taken.detail}".strip()
