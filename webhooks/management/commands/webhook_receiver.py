"""A webhook receiver for trying the service on one machine: it checks each delivery's
signature the way a receiver should (docs/webhooks.md, "Verifying the signature") and
prints one line per delivery.

    manage.py webhook_receiver 127.0.0.1:8125 --secret whsec_...

    enrollment.sent, signature verified: {"id": "...", "type": "enrollment.sent", ...}

It answers 200 to a verified delivery and 400 to any other request. Not for production:
one thread, no persistence.
"""

import hashlib
import hmac
import json
import time
from http.server import BaseHTTPRequestHandler, HTTPServer

from django.core.management.base import BaseCommand, CommandError

SIGNATURE_HEADER = "X-Service-Signature"
TOLERANCE_SECONDS = 300
MAX_BODY_BYTES = 1024 * 1024


def signature_problem(body: bytes, header: str, secret: str, now: float) -> str | None:
    """Why the signature does not verify, or None when it does."""
    parts = dict(item.split("=", 1) for item in header.split(",") if "=" in item)
    try:
        timestamp = int(parts["t"])
    except (KeyError, ValueError):
        return f"no timestamp in {SIGNATURE_HEADER}"
    if abs(now - timestamp) > TOLERANCE_SECONDS:
        return f"timestamp {timestamp} is more than {TOLERANCE_SECONDS} s away"
    expected = hmac.new(
        secret.encode(), f"{timestamp}.".encode() + body, hashlib.sha256
    ).hexdigest()
    if not hmac.compare_digest(expected, parts.get("v1", "")):
        return "signature does not match the secret"
    return None


class Command(BaseCommand):
    help = "Receive webhook deliveries on this machine, verify their signature, print them."

    def add_arguments(self, parser):
        parser.add_argument("address", help="host:port to listen on, e.g. 127.0.0.1:8125")
        parser.add_argument("--secret", required=True, help="the webhook's whsec_... secret")

    def handle(self, *args, address: str, secret: str, **options):
        host, _, port = address.rpartition(":")
        if not host or not port.isdigit():
            raise CommandError(f"address must be host:port, not {address!r}")
        out = self.stdout

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):  # noqa: N802 (http.server's name)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(min(length, MAX_BODY_BYTES))
                problem = signature_problem(
                    body, self.headers.get(SIGNATURE_HEADER, ""), secret, time.time()
                )
                try:
                    event_type = json.loads(body).get("type", "?")
                except (ValueError, AttributeError):
                    event_type = "?"
                verdict = "signature verified" if problem is None else f"REFUSED: {problem}"
                out.write(f"{event_type}, {verdict}: {body.decode('utf-8', 'replace')}")
                out.flush()
                self.send_response(200 if problem is None else 400)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format, *args):  # noqa: A002 (http.server's signature)
                pass  # one line per delivery, written above

        server = HTTPServer((host, int(port)), Handler)
        out.write(f"Listening on http://{address}/ for webhook deliveries (Ctrl-C stops).")
        out.flush()
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass
        finally:
            server.server_close()
