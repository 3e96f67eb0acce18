"""A write request that waits on a peer (`@network_first`, config.api.audit): while the
peer is asked, none of the request's database connections sits idle in a transaction,
and its audit row is still written after it. Checked from the peer's side: when the
peer is asked, this test database has no session `idle in transaction`."""

import socket
import threading
from collections.abc import Callable

import dns.exception
import psycopg
import pytest
from django.db import connection

from accounts import idempotency
from accounts.models import Account, AuditEvent, IdempotencyRecord
from config import dns as config_dns
from outreach.domains.tracking import verification_record
from outreach.models.mailboxes import SmtpCredential
from plans.models import Plan
from tests.accounts.factories import AccountFactory
from tests.billing.conftest import recorded, recorded_stripe, signed_event_post, stripe_event
from tests.outreach.factories import CredentialFactory
from tests.support.database import live_database_url
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Webhook

__all__ = ["recorded_stripe"]  # a fixture, used by name

pytestmark = pytest.mark.django_db(transaction=True)


class Sessions:
    """How many sessions of this test database were idle in a transaction, each time a
    peer was asked (`look`, called from the peer's thread)."""

    def __init__(self) -> None:
        self.seen: list[int] = []
        self.database = connection.settings_dict["NAME"]
        self.then: Callable[[], object] | None = None  # run after each look

    def look(self) -> None:
        with psycopg.connect(live_database_url(), autocommit=True) as conn:
            (count,) = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s"
                " AND state = 'idle in transaction' AND pid <> pg_backend_pid()",
                [self.database],
            ).fetchone()
        self.seen.append(count)
        if self.then is not None:
            self.then()

    def committed(self, model, **where) -> int:
        """How many rows of `model` matching `where` another session sees now: what is
        committed, and what a process killed at this moment would leave."""
        columns = " AND ".join(f"{name} = %s" for name in where) or "true"
        with psycopg.connect(live_database_url(), autocommit=True) as conn:
            (count,) = conn.execute(
                f"SELECT count(*) FROM {model._meta.db_table} WHERE {columns}",  # noqa: S608
                [str(value) for value in where.values()],
            ).fetchone()
        return count


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


def test_a_new_mailbox_commits_with_its_row_before_its_check_logs_in(api_client, account):
    sessions = Sessions()
    server = socket.create_server(("127.0.0.1", 0))
    seen_then: list[tuple[int, int]] = []

    def smtp_server() -> None:  # looks, then hangs up: the check fails at once
        conn, _ = server.accept()
        sessions.look()
        seen_then.append(
            (
                sessions.committed(SmtpCredential, account_id=account.pk),
                sessions.committed(AuditEvent, account_id=account.pk),
            )
        )
        conn.close()

    thread = threading.Thread(target=smtp_server, daemon=True)
    thread.start()
    body = {
        "from_email": "ada@example.com",
        "smtp_host": "127.0.0.1",
        "smtp_port": server.getsockname()[1],
        "smtp_security": "none",
        "smtp_username": "ada",
        "smtp_password": "secret",
    }
    response = api_client.post("/smtp_credentials", body, format="json")
    thread.join(timeout=10)
    server.close()

    assert response.status_code == 201, response.content
    assert response.json()["verification"]["smtp"]["ok"] is False
    assert sessions.seen == [0]
    # While the check logged in, the mailbox and its row were already committed: a
    # process killed then leaves a mailbox that `verify` checks, and its row.
    assert seen_then == [(1, 1)]
    assert _actions(account) == ["smtp_credential.create"]
    event = AuditEvent.objects.get(account=account)
    assert event.resource_id == response.json()["id"]


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


def _looking(sessions: Sessions, dns_server, then=None) -> None:
    """Each DNS question looks at the sessions first (and runs `then` at the first)."""
    asked = dns_server.asked

    def asked_and_looked(request) -> None:
        sessions.look()
        if then is not None and len(sessions.seen) == 1:
            then()
        asked(request)

    dns_server.asked = asked_and_looked  # this server's own hook, on this instance


def _txt(dns_server, account, domain: str) -> None:
    name, value = verification_record(account.pk, domain)
    dns_server.add(name, "TXT", value)


def test_a_tracking_domain_asks_dns_before_it_locks_and_writes(api_client, account, dns_server):
    dns_server.add("track.acme.test", "CNAME", "testserver.")
    _txt(dns_server, account, "track.acme.test")
    sessions = Sessions()
    _looking(sessions, dns_server)

    response = api_client.put("/tracking_domain", {"domain": "track.acme.test"}, format="json")
    cleared = api_client.put("/tracking_domain", {"domain": None}, format="json")

    assert (response.status_code, cleared.status_code) == (200, 200), response.content
    assert response.json()["status"] == "verified"
    assert len(sessions.seen) == 2 and set(sessions.seen) == {0}  # its CNAME, its TXT record
    assert _actions(account) == ["tracking_domain.update"] * 2


def test_a_tracking_domain_claimed_meanwhile_is_decided_again_under_the_locks(
    api_client, account, other_account, dns_server
):
    """Another account's verified claim committed while this PUT asked DNS: under the
    locks the PUT finds it, asks what that claim needs (that account's TXT record, not
    there), and takes the domain as the rules say."""
    dns_server.add("track.acme.test", "CNAME", "testserver.")
    _txt(dns_server, account, "track.acme.test")
    sessions = Sessions()

    def claimed_meanwhile() -> None:
        with psycopg.connect(live_database_url(), autocommit=True) as conn:
            conn.execute(
                f"UPDATE {Account._meta.db_table} SET tracking_domain = 'track.acme.test',"  # noqa: S608
                " tracking_domain_status = 'verified' WHERE id = %s",
                [str(other_account.pk)],
            )

    _looking(sessions, dns_server, then=claimed_meanwhile)
    response = api_client.put("/tracking_domain", {"domain": "track.acme.test"}, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["status"] == "verified"
    other_account.refresh_from_db()
    assert (other_account.tracking_domain, other_account.tracking_domain_status) == ("", "")
    # CNAME and TXT for this account, then the TXT record again for the other's claim.
    assert len(sessions.seen) == 3 and set(sessions.seen) == {0}
    assert _actions(account) == ["tracking_domain.update"]


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


def test_a_signup_asks_stripe_for_its_customer_before_its_transaction(anon_client, recorded_stripe):
    customer = {"id": "cus_Ts8fQ2LmZ0aXkP", "object": "customer", "email": "ada@example.com"}
    recorded_stripe.answer("POST", "/v1/customers", customer)
    sessions = Sessions()
    recorded_stripe.requests = _LookingList(sessions)
    accounts_then: list[int] = []
    # While Stripe is asked: no account yet, nothing a killed process would leave.
    sessions.then = lambda: accounts_then.append(
        sessions.committed(Account, email="ada@example.com")
    )

    response = anon_client.post("/signup", {"email": "ada@example.com"}, format="json")

    assert response.status_code == 201, response.content
    assert (sessions.seen, accounts_then) == ([0], [0])
    account = Account.objects.get(pk=response.json()["account_id"])
    # The account was committed with its customer, and with its row.
    assert account.psp_customer_id == "cus_Ts8fQ2LmZ0aXkP"
    assert _actions(account) == ["account.signup"]


# --- the outbound guard's lookups: a host an account registers ----------------------------

PUBLIC = "93.184.215.14"  # a public address: the guard lets it through


@pytest.fixture
def guard_dns(dns_server, monkeypatch, settings):
    """The outbound guard's lookups (socket.getaddrinfo: the system's resolver) of names
    under .test, asked of the test's DNS server as the domain checks' are; the guard
    refuses private addresses, as in production."""
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    real = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        if not (isinstance(host, str) and host.rstrip(".").endswith(".test")):
            return real(host, port, *args, **kwargs)
        try:
            answer = config_dns.resolver(cached=False).resolve(host, "A")
        except dns.exception.DNSException:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (r.address, port)) for r in answer]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns_server


def test_a_mailbox_change_of_host_asks_dns_outside_a_transaction(api_client, account, guard_dns):
    guard_dns.add("smtp.acme.test", "A", PUBLIC)
    guard_dns.add("imap.acme.test", "A", PUBLIC)
    credential = CredentialFactory(account=account, imap_host="")
    sessions = Sessions()
    unchanged_then: list[int] = []
    _looking(sessions, guard_dns)
    sessions.then = lambda: unchanged_then.append(
        sessions.committed(SmtpCredential, id=credential.pk, smtp_host=credential.smtp_host)
    )

    body = {"smtp_host": "smtp.acme.test", "imap_host": "imap.acme.test"}
    body |= {"imap_username": "ada", "imap_password": "secret"}
    response = api_client.patch(f"/smtp_credentials/{credential.pk}", body, format="json")

    assert response.status_code == 200, response.content
    assert (response.json()["smtp_host"], response.json()["imap_host"]) == (
        "smtp.acme.test",
        "imap.acme.test",
    )
    assert sessions.seen == [0, 0]  # each host's lookup, by the guard
    assert unchanged_then == [1, 1]  # nothing changed while DNS was asked
    assert _actions(account) == ["smtp_credential.update"]


def test_a_mailbox_host_that_resolves_inside_is_refused_as_before(api_client, account, guard_dns):
    guard_dns.add("smtp.acme.test", "A", "10.0.0.7")
    credential = CredentialFactory(account=account)

    body = {"smtp_host": "smtp.acme.test"}
    response = api_client.patch(f"/smtp_credentials/{credential.pk}", body, format="json")

    assert response.status_code == 422, response.content
    assert "private" in response.json()["details"]["fields"]["smtp_host"][0]
    assert SmtpCredential.objects.get(pk=credential.pk).smtp_host == credential.smtp_host
    assert _actions(account) == []


def _webhook_body(url: str = "https://hooks.acme.test/in") -> dict:
    return {"webhook": {"url": url, "event_filters": ["*"]}}


@pytest.mark.parametrize("key", [None, "create-hook-1"])
def test_a_webhook_registration_resolves_its_url_outside_a_transaction(
    api_client, account, guard_dns, key
):
    guard_dns.add("hooks.acme.test", "A", PUBLIC)
    sessions = Sessions()
    webhooks_then: list[int] = []
    _looking(sessions, guard_dns)
    sessions.then = lambda: webhooks_then.append(sessions.committed(Webhook, account_id=account.pk))
    headers = {"HTTP_IDEMPOTENCY_KEY": key} if key else {}

    response = api_client.post("/webhooks", _webhook_body(), format="json", **headers)

    assert response.status_code == 201, response.content
    assert (sessions.seen, webhooks_then) == ([0], [0])
    assert _actions(account) == ["webhook.create"]
    event = AuditEvent.objects.get(account=account)
    assert (event.resource_id, event.idempotency_key) == (response.json()["id"], key or "")


def test_a_webhook_registration_retried_with_its_key_is_made_once(api_client, account, guard_dns):
    """The webhook, its row and the answer its key replays commit in one transaction,
    after the lookup: a retry replays that answer (its secret too), makes nothing."""
    guard_dns.add("hooks.acme.test", "A", PUBLIC)
    key = {"HTTP_IDEMPOTENCY_KEY": "create-hook-2"}

    first = api_client.post("/webhooks", _webhook_body(), format="json", **key)
    again = api_client.post("/webhooks", _webhook_body(), format="json", **key)

    assert (first.status_code, again.status_code) == (201, 201), first.content
    assert again["Idempotent-Replay"] == "true"
    assert again.json() == first.json() and first.json()["secret"].startswith("whsec_")
    assert Webhook.objects.filter(account=account).count() == 1
    assert _actions(account) == ["webhook.create"]
    record = IdempotencyRecord.objects.get(account=account, key="create-hook-2")
    assert record.status == IdempotencyRecord.Status.COMPLETED
    assert len(guard_dns.queries) == 1  # the replay asks nothing


def test_a_webhook_registration_that_fails_storing_its_answer_leaves_nothing(
    api_client, account, guard_dns, monkeypatch
):
    """A failure as the answer is stored (a process killed there) undoes the webhook
    too: the retry of the key makes one webhook, not a second."""
    guard_dns.add("hooks.acme.test", "A", PUBLIC)
    store = idempotency._store
    failures = iter([RuntimeError("killed")])

    def store_once_failing(*args, **kwargs):
        failure = next(failures, None)
        if failure is not None:
            raise failure
        store(*args, **kwargs)

    monkeypatch.setattr(idempotency, "_store", store_once_failing)
    api_client.raise_request_exception = False
    key = {"HTTP_IDEMPOTENCY_KEY": "create-hook-4"}

    failed = api_client.post("/webhooks", _webhook_body(), format="json", **key)
    assert failed.status_code == 500
    assert not Webhook.objects.filter(account=account).exists()
    retried = api_client.post("/webhooks", _webhook_body(), format="json", **key)

    assert retried.status_code == 201, retried.content
    assert Webhook.objects.filter(account=account).count() == 1
    assert _actions(account) == ["webhook.create"]


def test_a_webhook_registration_refused_with_its_key_replays_the_refusal(
    api_client, account, guard_dns
):
    guard_dns.add("hooks.acme.test", "A", "127.0.0.1")
    key = {"HTTP_IDEMPOTENCY_KEY": "create-hook-3"}

    first = api_client.post("/webhooks", _webhook_body(), format="json", **key)
    again = api_client.post("/webhooks", _webhook_body(), format="json", **key)

    assert (first.status_code, again.status_code) == (422, 422), first.content
    assert "loopback" in first.json()["details"]["fields"]["webhook.url"][0]
    assert again.json() == first.json() and again["Idempotent-Replay"] == "true"
    assert not Webhook.objects.filter(account=account).exists()
    assert _actions(account) == []


def test_a_webhook_url_change_resolves_outside_a_transaction(api_client, account, guard_dns):
    guard_dns.add("next.acme.test", "A", PUBLIC)
    webhook = WebhookFactory(account=account)
    sessions = Sessions()
    _looking(sessions, guard_dns)

    body = {"webhook": {"url": "https://next.acme.test/in"}}
    response = api_client.patch(f"/webhooks/{webhook.pk}", body, format="json")

    assert response.status_code == 200, response.content
    assert response.json()["url"] == "https://next.acme.test/in"
    assert sessions.seen == [0]
    assert _actions(account) == ["webhook.update"]


def test_a_webhook_deleted_while_its_url_was_resolved_is_not_found(api_client, account, guard_dns):
    guard_dns.add("next.acme.test", "A", PUBLIC)
    webhook = WebhookFactory(account=account)
    sessions = Sessions()

    def deleted_meanwhile() -> None:
        with psycopg.connect(live_database_url(), autocommit=True) as conn:
            conn.execute(
                f"DELETE FROM {Webhook._meta.db_table} WHERE id = %s",  # noqa: S608
                [str(webhook.pk)],
            )

    _looking(sessions, guard_dns, then=deleted_meanwhile)
    body = {"webhook": {"url": "https://next.acme.test/in"}}
    response = api_client.patch(f"/webhooks/{webhook.pk}", body, format="json")

    assert response.status_code == 404, response.content
    assert response.json()["code"] == "webhook_not_found"
    assert _actions(account) == []


# --- Stripe, from an endpoint whose Idempotency-Key is optional, and its notifications ------


def test_a_checkout_without_a_key_asks_stripe_outside_a_transaction(
    api_client, account, recorded_stripe
):
    account.psp_customer_id = "cus_RkX2bQ9mTzL4aP"
    account.save(update_fields=["psp_customer_id"])
    Plan.objects.filter(slug="hobby").update(psp_price_id="price_1QmZwPLgUG5tbmjcHobby001")
    recorded_stripe.answer("POST", "/v1/checkout/sessions", recorded("checkout_session.json"))
    sessions = Sessions()
    recorded_stripe.requests = _LookingList(sessions)

    response = api_client.post("/billing/checkout", {"plan_slug": "hobby"}, format="json")

    assert response.status_code == 200, response.content
    assert sessions.seen == [0]
    assert _actions(account) == ["billing.checkout"]


def test_a_stripe_notification_reads_stripe_outside_a_transaction(anon_client, recorded_stripe):
    subscription = recorded("subscription_current_api.json")
    Plan.objects.filter(slug="pro").update(
        psp_price_id=subscription["items"]["data"][0]["price"]["id"]
    )
    recorded_stripe.answer("GET", f"/v1/subscriptions/{subscription['id']}", subscription)
    account = AccountFactory(psp_customer_id=subscription["customer"])
    sessions = Sessions()
    recorded_stripe.requests = _LookingList(sessions)

    response = signed_event_post(
        anon_client, stripe_event("customer.subscription.updated", subscription)
    )

    assert response.status_code == 200, response.content
    assert response.json()["outcome"] == "processed"
    # The subscription and the customer's live ones; again after the commit (settle).
    assert len(sessions.seen) == 4 and set(sessions.seen) == {0}
    account.refresh_from_db()
    assert account.plan.slug == "pro"
