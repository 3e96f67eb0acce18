"""POST /smtp_credentials/:id/verify, and the same check at create: connect and log in to
SMTP (a real aiosmtpd server) and IMAP (a real Dovecot), say what failed, change nothing."""

import socket
import time

import pytest

from outreach.models.mailboxes import SmtpCredential
from tests.intake.conftest import requires_dovecot
from tests.outreach.factories import CredentialFactory
from tests.outreach.helpers import assert_error
from tests.support.ports import free_port

pytestmark = pytest.mark.django_db

OK = {"ok": True, "error": None}


def verify(client, credential):
    response = client.post(f"/smtp_credentials/{credential.pk}/verify")
    assert response.status_code == 200, response.content
    return response.json()


def mailbox_on(account, sink, **fields) -> SmtpCredential:
    values = {
        "smtp_host": sink.host,
        "smtp_port": sink.port,
        "smtp_security": "none",
        "smtp_username": "",
        "smtp_password": "",
        **fields,
    }
    return CredentialFactory(account=account, **values)


def test_it_logs_in_to_smtp_and_says_ok(api_client, account, smtp_sink):
    sink = smtp_sink(username="sales", password="right")
    credential = mailbox_on(account, sink, smtp_username="sales", smtp_password="right")
    assert verify(api_client, credential) == {"smtp": OK, "imap": None}
    assert sink.auth_attempts == 1
    assert sink.messages == []  # nothing is sent


def test_a_wrong_password_is_the_servers_answer(api_client, account, smtp_sink):
    sink = smtp_sink(username="sales", password="right")
    credential = mailbox_on(account, sink, smtp_username="sales", smtp_password="wrong")
    result = verify(api_client, credential)
    assert result["smtp"]["ok"] is False
    assert result["smtp"]["error"].startswith("authentication failed: 535")


def test_starttls_against_a_plain_server_says_so(api_client, account, smtp_sink):
    # The default smtp_security (starttls) against a server without TLS.
    sink = smtp_sink()
    credential = mailbox_on(account, sink, smtp_security="starttls")
    assert verify(api_client, credential)["smtp"] == {
        "ok": False,
        "error": "SMTPNotSupportedError: STARTTLS extension not supported by server.",
    }


def test_nothing_listening_is_cannot_connect(api_client, account):
    port = free_port()
    credential = CredentialFactory(
        account=account, smtp_host="127.0.0.1", smtp_port=port, smtp_security="none"
    )
    error = verify(api_client, credential)["smtp"]["error"]
    assert error.startswith(f"cannot connect to 127.0.0.1:{port}: ")
    assert "Connection refused" in error


def test_a_server_that_never_answers_is_reported_within_the_limit(api_client, account, settings):
    settings.MAILBOX_VERIFY_TIMEOUT_SECONDS = 0.5
    with socket.socket() as silent:  # accepts connections (backlog), never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen(5)
        credential = CredentialFactory(
            account=account,
            smtp_host="127.0.0.1",
            smtp_port=silent.getsockname()[1],
            smtp_security="none",
        )
        started = time.monotonic()
        result = verify(api_client, credential)
        assert time.monotonic() - started < 3
    assert result == {"smtp": {"ok": False, "error": "no answer within 0.5 s"}, "imap": None}


def test_it_changes_nothing_on_the_mailbox(api_client, account, smtp_sink):
    sink = smtp_sink()
    credential = mailbox_on(account, sink, smtp_security="starttls")
    before = api_client.get(f"/smtp_credentials/{credential.pk}").json()
    verify(api_client, credential)
    assert api_client.get(f"/smtp_credentials/{credential.pk}").json() == before
    assert before["last_error"] is None


def test_another_accounts_mailbox_is_not_found(api_client, other_account):
    credential = CredentialFactory(account=other_account)
    response = api_client.post(f"/smtp_credentials/{credential.pk}/verify")
    assert_error(response, 404, "credential_not_found")


def test_it_needs_an_api_key(anon_client, account):
    credential = CredentialFactory(account=account)
    response = anon_client.post(f"/smtp_credentials/{credential.pk}/verify")
    assert_error(response, 401, "authentication_required")


def test_only_post(api_client, account):
    credential = CredentialFactory(account=account)
    response = api_client.get(f"/smtp_credentials/{credential.pk}/verify")
    assert_error(response, 405, "method_not_allowed")


@requires_dovecot
def test_it_logs_in_to_imap_too(api_client, account, smtp_sink, imap_mailbox):
    sink = smtp_sink()
    credential = mailbox_on(
        account,
        sink,
        imap_host=imap_mailbox.host,
        imap_port=imap_mailbox.port,
        imap_username=imap_mailbox.username,
        imap_password=imap_mailbox.password,
        imap_security="none",
    )
    assert verify(api_client, credential) == {"smtp": OK, "imap": OK}


@requires_dovecot
def test_a_wrong_imap_password_is_the_servers_answer(api_client, account, smtp_sink, imap_mailbox):
    sink = smtp_sink()
    credential = mailbox_on(
        account,
        sink,
        imap_host=imap_mailbox.host,
        imap_port=imap_mailbox.port,
        imap_username=imap_mailbox.username,
        imap_password="not-it",
        imap_security="none",
    )
    result = verify(api_client, credential)
    assert result["smtp"] == OK
    assert result["imap"]["ok"] is False
    assert result["imap"]["error"].startswith("IMAP: [AUTHENTICATIONFAILED]")


# --- at create ---


def create(client, sink, **fields):
    body = {
        "from_email": "sales@example.com",
        "smtp_host": sink.host,
        "smtp_port": sink.port,
        **fields,
    }
    return client.post("/smtp_credentials", body, format="json")


def test_create_runs_the_check_and_returns_it(api_client, smtp_sink):
    sink = smtp_sink()
    response = create(api_client, sink, smtp_security="none")
    assert response.status_code == 201, response.content
    assert response.json()["verification"] == {"smtp": OK, "imap": None}


def test_a_failed_check_still_creates_the_mailbox(api_client, smtp_sink):
    sink = smtp_sink()
    response = create(api_client, sink)  # smtp_security defaults to starttls
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["verification"]["smtp"] == {
        "ok": False,
        "error": "SMTPNotSupportedError: STARTTLS extension not supported by server.",
    }
    assert SmtpCredential.objects.filter(pk=body["id"]).exists()
    # The check is only in the create's answer, not a field of the mailbox.
    assert "verification" not in api_client.get(f"/smtp_credentials/{body['id']}").json()


def test_the_schema_documents_verify_and_the_created_answer(anon_client):
    schema = anon_client.get("/schema", HTTP_ACCEPT="application/json").json()
    operation = schema["paths"]["/smtp_credentials/{id}/verify"]["post"]
    ref = operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"]
    verification = schema["components"]["schemas"][ref.rsplit("/", 1)[1]]
    assert set(verification["properties"]) == {"smtp", "imap"}
    created = schema["paths"]["/smtp_credentials"]["post"]["responses"]["201"]
    ref = created["content"]["application/json"]["schema"]["$ref"]
    assert "verification" in schema["components"]["schemas"][ref.rsplit("/", 1)[1]]["properties"]
