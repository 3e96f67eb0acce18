"""Schema fuzzing: every operation of /schema, in-process over WSGI, with requests
schemathesis generates from the schema (valid ones and deliberately broken ones).
Every answer must be no 5xx, of a documented status and content type, and match the
schema. A fixed seed (derandomize) and a bounded number of examples per operation keep
it reproducible and within a couple of minutes.

Half of the generated ids are swapped for ids of real objects of the account, so the
operations on one resource get past their 404 into validation. Rate limits are raised
for the run (the fuzzer sends thousands of requests with one key); everything else is
the service as deployed, the outbound guard on.
"""

import hashlib
import ipaddress
import socket

import pytest
import schemathesis
from django.core.signals import request_finished, request_started
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from drf_spectacular.generators import SchemaGenerator
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    ignored_auth,
    missing_required_header,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from accounts import ratelimit, throttling
from accounts.services import api_key_create
from tests.accounts.factories import AccountFactory
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.webhooks.factories import WebhookFactory

# No 5xx; every answer documented and shaped as documented; and every request the
# schema forbids (negative data: an unknown field, a wrong type, a value out of its
# range) refused with a 4xx. (Not schemathesis' positive acceptance check: the service
# validates more than the schema can say, e.g. an email's syntax or a campaign's state.)
CHECKS = [
    not_a_server_error,
    negative_data_rejection,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    unsupported_method,
    allow_header_conformance,
    ignored_auth,
    missing_required_header,
]
# Examples per operation: 42 operations x this, ~10 ms each, over two processes.
MAX_EXAMPLES = 100

APP = get_wsgi_application()
SCHEMA = schemathesis.openapi.from_dict(SchemaGenerator().get_schema(request=None, public=True))
SCHEMA.app = APP  # every call, the checks' own included, goes to the app in-process


# What every generated host name resolves to: a public address, which no test connects to.
FUZZ_PUBLIC_ADDRESS = "93.184.216.34"


@pytest.fixture
def fuzz_account(db, settings, monkeypatch):
    settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS = False
    settings.STRIPE_SECRET_KEY = ""
    # A test delivery to a generated public address (POST /webhooks/:id/test) gives up
    # at once instead of waiting the production timeout for each example.
    settings.WEBHOOK_TIMEOUT_SECONDS = 0.2
    monkeypatch.setattr(throttling, "API_KEY_LIMIT", 10**9)
    settings.SIGNUP_RATE_LIMIT = 10**9
    monkeypatch.setattr(ratelimit, "AUTH_FAILURE_LIMIT", 10**9)
    # No DNS: names under example.test resolve to a public address, others do not
    # resolve (at once, instead of waiting on a resolver for each generated host).
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host, port, *args, **kwargs):
        try:
            ipaddress.ip_address(str(host).strip("[]"))
        except ValueError:
            if str(host).endswith(".example.test"):
                return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (FUZZ_PUBLIC_ADDRESS, port))]
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known") from None
        return real_getaddrinfo(host, port, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    # The outbound guard lets that public address through; the connection itself never
    # leaves the machine: it is refused at once (a test delivery or mailbox check then
    # reports its connection error, as it would for a peer that is down).
    real_connect = socket.socket.connect

    def connect(sock, address):
        if isinstance(address, tuple) and address[0] == FUZZ_PUBLIC_ADDRESS:
            raise ConnectionRefusedError(111, "Connection refused (fuzz: no peer)")
        return real_connect(sock, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    # Django's test client does the same: the test's transaction must survive requests.
    request_started.disconnect(close_old_connections)
    request_finished.disconnect(close_old_connections)
    account = AccountFactory()
    key = api_key_create(account=account, label="fuzz").plaintext
    campaign = CampaignFactory(account=account)
    ids = {
        "campaigns": str(campaign.pk),
        "contacts": str(ContactFactory(account=account).pk),
        "smtp_credentials": str(CredentialFactory(account=account).pk),
        "webhooks": str(WebhookFactory(account=account).pk),
        "api_keys": str(api_key_create(account=account, label="spare").api_key.pk),
    }
    try:
        yield key, ids
    finally:
        request_started.connect(close_old_connections)
        request_finished.connect(close_old_connections)


# Values that pass the service's own checks (an email's syntax, a host it may reach),
# swapped into half of the bodies so generated requests also get past validation into
# the services.
PLAUSIBLE = {
    "email": "fuzz@example.org",
    "from_email": "sender@example.org",
    "smtp_host": "smtp.example.test",
    "imap_host": "imap.example.test",
    "url": "https://hooks.example.test/in",
}


def _half(value) -> bool:
    return hashlib.sha256(repr(value).encode()).digest()[0] % 2 == 1


def _plausible(body, ids: dict) -> None:
    if isinstance(body, list):
        for item in body:
            _plausible(item, ids)
        return
    if not isinstance(body, dict):
        return
    for key, value in list(body.items()):
        if key in PLAUSIBLE and _half(value):
            body[key] = PLAUSIBLE[key]
        elif key == "campaign_id" and _half(value):
            body[key] = ids["campaigns"]
        else:
            _plausible(value, ids)


def _real_ids(case, ids: dict) -> None:
    """Swap the path's id for a real object's in half of the cases (chosen by the
    generated id, so the run stays deterministic)."""
    params = case.path_parameters or {}
    if "id" not in params:
        return
    resource = case.path.strip("/").split("/")[0]
    if resource in ids and hashlib.sha256(str(params["id"]).encode()).digest()[0] % 2:
        params["id"] = ids[resource]


@pytest.mark.fuzz
@SCHEMA.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation_answers_as_documented(case, fuzz_account):
    key, ids = fuzz_account
    headers = {"Authorization": f"Bearer {key}"}
    if _negative(case):
        # A request the schema forbids goes as generated: swapping in a real id or a
        # plausible value would make it valid again. When the negation is the missing
        # key itself, the request goes without one.
        header = case.meta.components.get(ParameterLocation.HEADER)
        if header is not None and header.mode.is_negative:
            headers = {}
    else:
        _real_ids(case, ids)
        _plausible(case.body, ids)
    case.call_and_validate(headers=headers, checks=CHECKS)


def _negative(case) -> bool:
    return case.meta is not None and case.meta.generation.mode.is_negative
