"""Relay-provider event webhooks: POST /inbound/relay/<credential_id>.

Order, for every request:
1. find the credential and its provider (unknown, or no provider/key: unverified);
2. verify the request the way the provider signs it (Mailgun: HMAC-SHA256 of
   timestamp + token in the body; SendGrid: ECDSA P-256 over timestamp + raw body),
   refuse a timestamp more than 5 minutes away, and (Mailgun) a token already used;
3. in ONE transaction: remember the token, then turn each event into its service
   (permanent bounce -> enrollment_mark_bounced, spam complaint -> contact_unsubscribe).
   Events for messages we did not send are counted as ignored.

Anything unverified raises RelayUnverified and nothing is written.
"""

import base64
import binascii
import hashlib
import hmac
import json
import logging
import time
from dataclasses import dataclass, field
from datetime import timedelta

from cryptography.exceptions import InvalidSignature, UnsupportedAlgorithm
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from django.db import IntegrityError, transaction
from django.utils import timezone

from config.api.ids import is_uuid
from outreach.bounce_types import BLOCK, BounceClass, classify
from outreach.contacts.suppression import suppression_record
from outreach.intake.complaints import complaint_apply
from outreach.intake.selectors import message_find
from outreach.models.contacts import Contact, Suppression
from outreach.models.intake import RelayWebhookToken
from outreach.models.mailboxes import SmtpCredential
from outreach.sending.bounces import enrollment_mark_bounced

logger = logging.getLogger(__name__)

# Requests signed more than this far from now are refused (both providers).
TIMESTAMP_TOLERANCE_SECONDS = 300
SENDGRID_SIGNATURE_HEADER = "X-Twilio-Email-Event-Webhook-Signature"
SENDGRID_TIMESTAMP_HEADER = "X-Twilio-Email-Event-Webhook-Timestamp"

BOUNCE = "bounce"
COMPLAINT = "complaint"


class RelayUnverified(Exception):
    """The request cannot be attributed to the credential's provider (401)."""


class RelayMalformed(Exception):
    """Verified, but the body is not the provider's event format (400)."""


@dataclass(frozen=True)
class RelayEvent:
    kind: str  # BOUNCE or COMPLAINT
    message_id: str  # as the provider gave it; may be empty
    recipient: str = ""
    reason: str = ""
    # A bounce's meaning (outreach.bounce_types), from the provider's type and words.
    bounce_class: BounceClass | None = None


@dataclass
class RelayOutcome:
    received: int = 0
    bounced: int = 0
    unsubscribed: int = 0
    ignored: int = 0
    details: list[dict] = field(default_factory=list)

    def as_json(self) -> dict:
        return {
            "received": self.received,
            "bounced": self.bounced,
            "unsubscribed": self.unsubscribed,
            "ignored": self.ignored,
        }


def _fresh(timestamp: str) -> bool:
    try:
        value = int(str(timestamp).strip())
    except ValueError:
        return False
    return abs(time.time() - value) <= TIMESTAMP_TOLERANCE_SECONDS


# --- Mailgun -----------------------------------------------------------------------------


def mailgun_verify(*, signing_key: str, body: bytes) -> tuple[dict, str]:
    """The event-data of a Mailgun webhook and its token, or RelayUnverified.

    Mailgun signs inside the JSON body: signature = hex HMAC-SHA256(signing key,
    timestamp + token)."""
    try:
        payload = json.loads(body)
        signature = payload["signature"]
        timestamp = str(signature["timestamp"])
        token = str(signature["token"])
        given = str(signature["signature"])
    except (ValueError, TypeError, KeyError) as exc:
        raise RelayUnverified("no Mailgun signature in the body") from exc
    expected = hmac.new(
        signing_key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, given.strip().lower()):
        raise RelayUnverified("Mailgun signature does not verify")
    if not _fresh(timestamp):
        raise RelayUnverified("Mailgun timestamp outside the 5-minute window")
    event_data = payload.get("event-data")
    if not isinstance(event_data, dict):
        raise RelayMalformed("Mailgun body without event-data")
    return event_data, token


def mailgun_events(event_data: dict) -> list[RelayEvent]:
    """`failed` with severity `permanent` is a bounce; `complained` a complaint.
    Temporary failures (Mailgun retries them) and other events are not ours."""
    kind = None
    event = event_data.get("event")
    if event == "failed" and event_data.get("severity") == "permanent":
        kind = BOUNCE
    elif event == "complained":
        kind = COMPLAINT
    if kind is None:
        return []
    message = event_data.get("message")
    message = message if isinstance(message, dict) else {}
    headers = message.get("headers")
    headers = headers if isinstance(headers, dict) else {}
    status = event_data.get("delivery-status")
    status = status if isinstance(status, dict) else {}
    detail = status.get("description") or status.get("message") or event_data.get("reason") or ""
    code = status.get("code")
    reason = f"{code} {detail}".strip() if code else str(detail)
    klass = None
    if kind == BOUNCE:
        klass = classify(code=code if isinstance(code, int) else None, text=reason)
        if event_data.get("reason") == "espblock":  # the receiving provider blocked the sender
            klass = _as_block(klass)
    return [
        RelayEvent(
            kind=kind,
            message_id=str(headers.get("message-id") or ""),
            recipient=str(event_data.get("recipient") or ""),
            reason=reason or "Permanent failure reported by Mailgun",
            bounce_class=klass,
        )
    ]


def _as_block(klass: BounceClass) -> BounceClass:
    """A provider's word that the sender was refused, not the address: a `block`, with
    the category the reply's words give when it is one of the block categories."""
    if klass.type == BLOCK:
        return klass
    return BounceClass(BLOCK, "blocked")


# --- SendGrid ----------------------------------------------------------------------------


def _sendgrid_public_key(value: str) -> ec.EllipticCurvePublicKey:
    """The verification key as SendGrid shows it (base64 DER), or as PEM."""
    value = value.strip()
    try:
        if "BEGIN PUBLIC KEY" in value:
            key = serialization.load_pem_public_key(value.encode())
        else:
            key = serialization.load_der_public_key(base64.b64decode(value, validate=False))
    except (ValueError, binascii.Error, UnsupportedAlgorithm) as exc:
        raise RelayUnverified("the stored SendGrid public key cannot be read") from exc
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise RelayUnverified("the stored SendGrid key is not an elliptic-curve public key")
    return key


def sendgrid_verify(*, public_key: str, body: bytes, signature: str, timestamp: str) -> list:
    """The event array of a signed SendGrid event webhook, or RelayUnverified.

    SendGrid signs timestamp + raw body with ECDSA P-256 / SHA-256; the header
    carries the base64 DER signature."""
    if not signature or not timestamp:
        raise RelayUnverified("SendGrid signature headers missing")
    key = _sendgrid_public_key(public_key)
    try:
        der = base64.b64decode(signature, validate=True)
        key.verify(der, timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
    except (binascii.Error, ValueError, InvalidSignature) as exc:
        raise RelayUnverified("SendGrid signature does not verify") from exc
    if not _fresh(timestamp):
        raise RelayUnverified("SendGrid timestamp outside the 5-minute window")
    try:
        events = json.loads(body)
    except ValueError as exc:
        raise RelayMalformed("SendGrid body is not JSON") from exc
    if not isinstance(events, list):
        raise RelayMalformed("SendGrid body is not an array of events")
    return events


def sendgrid_events(items: list) -> list[RelayEvent]:
    """`bounce` events and `spamreport` complaints. A bounce of type `blocked` is a
    rejection of the message, not of the address (SendGrid does not suppress it): a
    `block` bounce; type `bounce` is classified by its status and words."""
    events = []
    for item in items:
        if not isinstance(item, dict):
            continue
        event = item.get("event")
        klass = None
        if event == "bounce":
            status = str(item.get("status") or "")
            reason = str(item.get("reason") or "")
            text = f"{status} {reason}".strip() if status and status not in reason else reason
            kind = BOUNCE
            klass = classify(code=None, text=text or status)
            if item.get("type") == "blocked":
                klass = _as_block(klass)
        elif event == "spamreport":
            kind, text = COMPLAINT, ""
        else:
            continue
        events.append(
            RelayEvent(
                kind=kind,
                message_id=str(item.get("smtp-id") or ""),
                recipient=str(item.get("email") or ""),
                reason=text or "Bounce reported by SendGrid",
                bounce_class=klass,
            )
        )
    return events


# --- processing --------------------------------------------------------------------------


def relay_webhook_receive(*, credential_id: str, body: bytes, headers) -> RelayOutcome:
    """Verify one provider request and apply all its events in one transaction."""
    credential = (
        SmtpCredential.objects.filter(pk=credential_id).first() if is_uuid(credential_id) else None
    )
    if credential is None or not credential.relay_provider:
        raise RelayUnverified("unknown credential, or no relay provider configured")
    key = credential.relay_signing_key
    if not key:
        raise RelayUnverified("no signing key stored for the credential")

    token = None
    if credential.relay_provider == SmtpCredential.RelayProvider.MAILGUN:
        event_data, token = mailgun_verify(signing_key=key, body=body)
        events = mailgun_events(event_data)
    else:
        items = sendgrid_verify(
            public_key=key,
            body=body,
            signature=headers.get(SENDGRID_SIGNATURE_HEADER, ""),
            timestamp=headers.get(SENDGRID_TIMESTAMP_HEADER, ""),
        )
        events = sendgrid_events(items)

    outcome = RelayOutcome(received=len(events))
    with transaction.atomic():
        if token is not None:
            try:
                with transaction.atomic():
                    RelayWebhookToken.objects.create(
                        token=token[:255], credential=credential, received_at=timezone.now()
                    )
            except IntegrityError as exc:
                raise RelayUnverified("Mailgun token already used (replay)") from exc
        for event in events:
            relay_event_apply(credential=credential, event=event, outcome=outcome)
    logger.info(
        "relay %s for credential %s: %s",
        credential.relay_provider,
        credential.pk,
        outcome.as_json(),
    )
    return outcome


def relay_event_apply(
    *, credential: SmtpCredential, event: RelayEvent, outcome: RelayOutcome
) -> None:
    """One verified provider event (a permanent bounce, a spam complaint) applied through
    its service, counted in `outcome`. A simulator mailbox's complaints come here too
    (outreach.intake.simulator)."""
    message = message_find(account_id=credential.account_id, message_ids=[event.message_id])
    if event.kind == BOUNCE:
        if message is None:
            outcome.ignored += 1
            return
        changed = enrollment_mark_bounced(
            enrollment=message.enrollment,
            reason=event.reason,
            credential=message.credential,
            bounce_class=event.bounce_class,
        )
        outcome.bounced += 1 if changed else 0
        outcome.ignored += 0 if changed else 1
        return
    # A complaint is about the recipient: with no Message-ID in the event, the
    # account's contact with that address is the one who complained.
    contact_id = message.enrollment.contact_id if message else None
    if contact_id is None and not event.message_id and event.recipient:
        contact_id = (
            Contact.objects.filter(
                account_id=credential.account_id, email_lower=event.recipient.strip().lower()
            )
            .values_list("pk", flat=True)
            .first()
        )
    if contact_id is None:
        address = (event.recipient or "").strip()
        if not event.message_id and "@" in address and len(address) <= 254:
            # Nobody to unsubscribe yet: the address stays suppressed for the account,
            # so a contact created with it later is never sent to.
            suppression_record(
                account_id=credential.account_id,
                email=address,
                reason=Suppression.Reason.COMPLAINED,
                at=timezone.now(),
            )
        outcome.ignored += 1
        return
    moved = complaint_apply(contact_id=contact_id, message=message, mailbox_id=credential.pk)
    outcome.unsubscribed += max(moved, 0)
    outcome.ignored += 1 if moved < 0 else 0


def relay_tokens_prune(*, older_than: timedelta = timedelta(minutes=15)) -> int:
    """Forget Mailgun tokens whose timestamps can no longer pass the freshness check."""
    deleted, _ = RelayWebhookToken.objects.filter(
        received_at__lt=timezone.now() - older_than
    ).delete()
    return deleted
