"""Requests built and signed exactly as the providers build and sign them."""

import base64
import hashlib
import hmac
import json
import secrets
import time

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

MAILGUN_KEY = "mailgun-http-webhook-signing-key-0123456789abcdef"


def mailgun_body(event_data: dict, *, key: str = MAILGUN_KEY, timestamp=None, token=None) -> bytes:
    """Mailgun's JSON webhook: {"signature": {timestamp, token, signature}, "event-data": {...}},
    signature = hex HMAC-SHA256(key, timestamp + token)."""
    timestamp = str(int(time.time()) if timestamp is None else timestamp)
    token = token or secrets.token_hex(25)  # Mailgun: 50 random characters
    signature = hmac.new(key.encode(), f"{timestamp}{token}".encode(), hashlib.sha256).hexdigest()
    return json.dumps(
        {
            "signature": {"timestamp": timestamp, "token": token, "signature": signature},
            "event-data": event_data,
        }
    ).encode()


def mailgun_failed(message_id: str, *, recipient="someone@example.org", severity="permanent"):
    return {
        "event": "failed",
        "severity": severity,
        "reason": "bounce" if severity == "permanent" else "generic",
        "id": secrets.token_hex(8),
        "timestamp": time.time(),
        "recipient": recipient,
        "delivery-status": {
            "code": 550,
            "message": "5.1.1 The email account that you tried to reach does not exist.",
            "description": "",
            "attempt-no": 1,
        },
        "message": {"headers": {"message-id": message_id, "to": recipient, "subject": "Hello"}},
    }


def mailgun_complained(message_id: str, *, recipient="someone@example.org"):
    return {
        "event": "complained",
        "id": secrets.token_hex(8),
        "timestamp": time.time(),
        "recipient": recipient,
        "message": {"headers": {"message-id": message_id, "to": recipient}},
    }


class SendGridKeys:
    """The key pair SendGrid generates when signed event webhooks are enabled;
    `public_base64` is what its settings page shows (base64 DER SubjectPublicKeyInfo)."""

    def __init__(self):
        self.private = ec.generate_private_key(ec.SECP256R1())
        der = self.private.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        self.public_base64 = base64.b64encode(der).decode()
        self.public_pem = (
            self.private.public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def headers(self, body: bytes, *, timestamp=None) -> dict:
        """X-Twilio-Email-Event-Webhook-{Signature,Timestamp}: base64 DER ECDSA
        (P-256, SHA-256) of timestamp + raw body."""
        timestamp = str(int(time.time()) if timestamp is None else timestamp)
        signature = self.private.sign(timestamp.encode() + body, ec.ECDSA(hashes.SHA256()))
        return {
            "HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_SIGNATURE": base64.b64encode(signature).decode(),
            "HTTP_X_TWILIO_EMAIL_EVENT_WEBHOOK_TIMESTAMP": timestamp,
        }


def sendgrid_event(event: str, message_id: str, *, email="someone@example.org", **extra) -> dict:
    return {
        "email": email,
        "timestamp": int(time.time()),
        "smtp-id": f"<{message_id}>",
        "event": event,
        "sg_event_id": secrets.token_urlsafe(16),
        "sg_message_id": f"{secrets.token_hex(8)}.filter0001.16648.5515E0B88.0",
        **extra,
    }
