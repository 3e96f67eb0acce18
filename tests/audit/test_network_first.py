"""A write request that waits on a peer (`@network_first`, config.api.audit): while the
peer is asked, none of the request's database connections sits idle in a transaction,
and its audit row is still written after it. Checked from the peer's side: when the
peer is asked, this test database has no session `idle in transaction`."""

import socket
import threading

import psycopg
import pytest
from django.db import connection

from accounts.models import AuditEvent
from plans.models import Plan
from tests.billing.conftest import recorded, recorded_stripe
from tests.outreach.factories import CredentialFactory
from tests.support.database import live_database_url

__all__ = ["recorded_stripe"]  # a fixture, used by name

pytestmark = pytest.mark.django_db(transaction=True)


class Sessions:
    """How many sessions of this test database were idle in a transaction, each time a
    peer was asked (`look`, called from the peer's thread)."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.database = connection.settings_dict["NAME"]

    def look(self) -> None:
        with psycopg.connect(live_database_url(), autocommit=True) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND state = 'idle in transaction' AND pid <> pg_backend_pid()",
                [self.database],
            ).fetchone()
        self.seen.append(count)


def _actions(account) -> list[str]:
    return list(AuditEvent.objects.filter(account=account).values_list("action", flat=True))


def test_a_mailbox_check_logs_in_outside_a_transaction(api_client, account):
    sessions = Sessions()
    server = socket.create_server(("127.0.0.1", 0))

    def smtp_server() -> None:  # looks, then hangs up: the check fails at once
        conn, _ = server.accept()
        sessions.look()
        conn.close()

    thread = threading.Thread(target=smtp_server, daemon=True)
    thread.start()
    credential = CredentialFactory(
        account=account, smtp_host="127.0.0.1", smtp_port=server.getsockname()[1], imap_host=""
    )
    response = api_client.post(f"/smtp_credentials/{credential.pk}/verify")
    thread.join(timeout=10)
    server.close()

    assert response.status_code == 200, response.content
    assert response.json()["smtp"]["ok"] is False
    assert sessions.seen == [0]
    assert _actions(account) == ["smtp_credential.verify"]


def test_a_domain_check_asks_dns_outside_a_transaction(api_client, account, dns_server):
    sessions = Sessions()
    asked = dns_server.asked

    def asked_and_looked(request) -> None:
        sessions.look()
        asked(request)

    dns_server.asked = asked_and_looked  # this server's own hook, on this instance
    credential = CredentialFactory(account=account, from_email="ada@acme.test")
    response = api_client.post(f"/smtp_credentials/{credential.pk}/domain_check", {}, format="json")

    assert response.status_code == 200, response.content
    assert sessions.seen and set(sessions.seen) == {0}
    assert _actions(account) == ["smtp_credential.domain_check"]


class _LookingList(list):
    def __init__(self, sessions: Sessions) -> None:
        super().__init__()
        self.sessions = sessions

    def append(self, item) -> None:
        self.sessions.look()
        super().append(item)


def test_checkout_and_portal_ask_stripe_outside_a_transaction(api_client, account, recorded_stripe):
    account.psp_customer_id = "cus_RkX2bQ9mTzL4aP"
    account.save(update_fields=["psp_customer_id"])
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_1QmZwPLgUG5tbmjcHobby001")
    recorded_stripe.answer("POST", "/v1/checkout/sessions", recorded("checkout_session.json"))
    recorded_stripe.answer("POST", "/v1/billing_portal/sessions", recorded("portal_session.json"))
    sessions = Sessions()
    recorded_stripe.requests = _LookingList(sessions)

    checkout = api_client.post(
        "/billing/checkout", {"plan_slug": "hobby"}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    portal = api_client.post("/billing/portal")

    assert (checkout.status_code, portal.status_code) == (200, 200), checkout.content
    assert len(sessions.seen) >= 2 and set(sessions.seen) == {0}
    assert sorted(_actions(account)) == ["billing.checkout", "billing.portal"]
    # The key's stored answer replays, and writes no second row.
    again = api_client.post(
        "/billing/checkout", {"plan_slug": "hobby"}, format="json", HTTP_IDEMPOTENCY_KEY="k1"
    )
    assert again["Idempotent-Replay"] == "true"
    assert again.json() == checkout.json()
    assert sorted(_actions(account)) == ["billing.checkout", "billing.portal"]
