"""X-Request-Id on every response (docs/audit.md, "Request ids"): the client's own when
valid (1-200 characters of A-Z a-z 0-9 . _ : -), else a new UUID; and in the log lines
written while the request runs."""

import logging
import uuid

import pytest

from config.logs import JsonFormatter, LineFilter, PlainFormatter
from config.request_id import request_id_of

pytestmark = pytest.mark.django_db


def _is_uuid(value: str) -> bool:
    try:
        return str(uuid.UUID(value)) == value
    except ValueError:
        return False


@pytest.mark.parametrize(
    "path",
    ["/health", "/plans", "/campaigns", "/no/such/route", "/admin/login/", "/schema"],
)
def test_every_response_carries_one(client, path):
    response = client.get(path)
    assert _is_uuid(response["X-Request-Id"])
    mine = client.get(path, HTTP_X_REQUEST_ID="trace-1.2:3_4-5")
    assert mine["X-Request-Id"] == "trace-1.2:3_4-5"


def test_errors_and_refusals_carry_one(api_client, anon_client):
    assert _is_uuid(anon_client.post("/campaigns", {}, format="json")["X-Request-Id"])
    too_big = api_client.generic(
        "POST", "/campaigns", b"x" * (2 * 1024 * 1024), content_type="application/json"
    )
    assert too_big.status_code == 413
    assert _is_uuid(too_big["X-Request-Id"])
    invalid = api_client.patch("/campaigns/x", {}, format="json", HTTP_X_REQUEST_ID="ok-1")
    assert (invalid.status_code, invalid["X-Request-Id"]) == (404, "ok-1")


@pytest.mark.parametrize(
    "raw", ["", "a" * 201, "with space", "semi;colon", "new\nline", "é", "a/b", "{x}"]
)
def test_an_invalid_id_is_replaced(raw):
    assert _is_uuid(request_id_of(raw))


@pytest.mark.parametrize("raw", ["a", "a" * 200, "0af7651916cd43dd8448eb211c80319c", "x.y:z_w-1"])
def test_a_valid_id_is_kept(raw):
    assert request_id_of(raw) == raw


def test_log_lines_of_a_request_name_it(api_client):
    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep()
    handler.addFilter(LineFilter())
    logger = logging.getLogger("accounts.services")
    logger.addHandler(handler)
    try:
        api_client.post("/api_keys", {"label": "ci"}, format="json", HTTP_X_REQUEST_ID="lost-1")
    finally:
        logger.removeHandler(handler)
    [record] = [r for r in records if "api key created" in r.getMessage()]
    assert record.request_id == "lost-1"
    assert PlainFormatter().format(record).endswith(" request_id=lost-1")
    assert '"request_id": "lost-1"' in JsonFormatter().format(record)


def test_a_line_outside_a_request_names_none():
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "beat tick", None, None)
    LineFilter().filter(record)
    assert PlainFormatter().format(record).endswith("beat tick")
    assert "request_id" not in JsonFormatter().format(record)
