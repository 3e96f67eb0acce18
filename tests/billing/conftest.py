"""Billing test support: a recorded-Stripe HTTP server for the calls localstripe
lacks (Checkout, Billing Portal, current-API subscriptions), and signed events."""

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qsl

import pytest
import requests
import stripe

from tests.support.localstripe import STRIPE_TEST_KEY

RECORDED = Path(__file__).parent / "recorded"
WEBHOOK_SECRET = "whsec_test_localstripe"


def recorded(name: str) -> dict:
    return json.loads((RECORDED / name).read_text())


@dataclass
class CapturedRequest:
    method: str
    path: str
    headers: dict
    form: dict  # the urlencoded body, as Stripe receives it: {"line_items[0][price]": "..."}


@dataclass
class RecordedStripe:
    """Answers each (method, path) with a recorded Stripe body and keeps every request."""

    url: str = ""
    # The customer's live subscriptions: none unless a test records some.
    routes: dict = field(
        default_factory=lambda: {
            ("GET", "/v1/subscriptions"): [
                (200, {"object": "list", "data": [], "has_more": False, "url": "/v1/subscriptions"})
            ]
        }
    )
    requests: list = field(default_factory=list)

    def answer(self, method: str, path: str, body: dict, status: int = 200) -> None:
        self.routes[(method, path)] = [(status, body)]

    def answer_in_turn(self, method: str, path: str, *bodies: dict) -> None:
        """Each request gets the next body (200); the last one repeats."""
        self.routes[(method, path)] = [(200, body) for body in bodies]


def _handler_for(stub: RecordedStripe):
    class Handler(BaseHTTPRequestHandler):
        def _serve(self):
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length).decode() if length else ""
            path = self.path.split("?", 1)[0]
            stub.requests.append(
                CapturedRequest(
                    method=self.command,
                    path=path,
                    headers={k.lower(): v for k, v in self.headers.items()},
                    form=dict(parse_qsl(raw, keep_blank_values=True)),
                )
            )
            answers = stub.routes.get(
                (self.command, path),
                [(404, {"error": {"type": "invalid_request_error", "message": "Unrecorded"}})],
            )
            status, body = answers.pop(0) if len(answers) > 1 else answers[0]
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Request-Id", "req_recorded")
            self.end_headers()
            self.wfile.write(payload)

        do_GET = do_POST = do_DELETE = _serve

        def log_message(self, *args):
            pass

    return Handler


@pytest.fixture
def recorded_stripe(settings):
    """Stripe at the HTTP boundary: recorded responses, captured requests."""
    stub = RecordedStripe()
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(stub))
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    stub.url = f"http://127.0.0.1:{server.server_address[1]}"
    settings.STRIPE_SECRET_KEY = "sk_test_recorded"
    settings.STRIPE_API_BASE = stub.url
    settings.STRIPE_WEBHOOK_SECRET = WEBHOOK_SECRET
    try:
        yield stub
    finally:
        server.shutdown()
        server.server_close()


def signed_event_post(client, event: dict, *, secret: str = WEBHOOK_SECRET, timestamp=None):
    """POST an event to /webhooks/psp signed the way Stripe signs it."""
    payload = json.dumps(event)
    header = stripe.WebhookSignature.generate_signature_header(
        payload, secret, timestamp=timestamp or int(time.time())
    )
    return client.post(
        "/webhooks/psp",
        data=payload,
        content_type="application/json",
        HTTP_STRIPE_SIGNATURE=header,
    )


_counter = iter(range(1, 10**9))


def stripe_event(event_type: str, obj: dict, *, event_id: str | None = None) -> dict:
    """A Stripe event envelope around `obj`."""
    return {
        "id": event_id or f"evt_test_{next(_counter):06d}",
        "object": "event",
        "api_version": "2026-10-28.endive",
        "created": int(time.time()),
        "data": {"object": obj},
        "livemode": False,
        "pending_webhooks": 1,
        "request": {"id": None, "idempotency_key": None},
        "type": event_type,
    }


# --- localstripe helpers -----------------------------------------------------


def localstripe_price(peer, price_id: str, *, amount: int = 900) -> str:
    """A monthly price at localstripe (a `plan` there: it has no /v1/prices)."""
    product = peer.post("/v1/products", {"name": price_id, "type": "service"})
    peer.post(
        "/v1/plans",
        {
            "id": price_id,
            "amount": amount,
            "currency": "usd",
            "interval": "month",
            "product": product["id"],
        },
    )
    return price_id


def localstripe_card_on_file(peer, customer_id: str) -> None:
    method = peer.post(
        "/v1/payment_methods",
        {
            "type": "card",
            "card[number]": "4242424242424242",
            "card[exp_month]": "12",
            "card[exp_year]": "2030",
            "card[cvc]": "123",
        },
    )
    peer.post(f"/v1/payment_methods/{method['id']}/attach", {"customer": customer_id})
    peer.post(
        f"/v1/customers/{customer_id}",
        {"invoice_settings[default_payment_method]": method["id"]},
    )


def localstripe_subscribe(peer, customer_id: str, price_id: str) -> dict:
    return peer.post("/v1/subscriptions", {"customer": customer_id, "items[0][plan]": price_id})


def localstripe_cancel(peer, subscription_id: str) -> dict:
    response = requests.delete(
        f"{peer.url}/v1/subscriptions/{subscription_id}", auth=(STRIPE_TEST_KEY, ""), timeout=10
    )
    response.raise_for_status()
    return response.json()


def localstripe_change_price(peer, subscription: dict, price_id: str) -> dict:
    item_id = subscription["items"]["data"][0]["id"]
    return peer.post(
        f"/v1/subscriptions/{subscription['id']}",
        {"items[0][id]": item_id, "items[0][plan]": price_id},
    )
