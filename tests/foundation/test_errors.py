"""Every error class, from every layer, arrives in the envelope."""

import html
import json
import re

import pytest
from django.test import Client, override_settings

from config.api.errors import ERROR_CODES

pytestmark = [pytest.mark.django_db, pytest.mark.urls("tests.foundation.probe_urls")]


def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert body["type"] == f"http://testserver/docs/errors/{code}"
    assert isinstance(body["message"], str) and body["message"]
    return body


def test_unknown_route_is_not_found(anon_client):
    assert_envelope(anon_client.get("/no/such/route"), 404, "not_found")


def test_wrong_method_is_method_not_allowed(anon_client):
    assert_envelope(anon_client.delete("/plans"), 405, "method_not_allowed")


def test_malformed_json_is_invalid_json(anon_client):
    response = anon_client.post("/probe/public", data="{not json", content_type="application/json")
    assert_envelope(response, 400, "invalid_json")


def test_validation_is_422_with_fields(anon_client):
    response = anon_client.post(
        "/probe/public", {"email": "nope", "nested": [{"a": 1}, {"a": "x"}]}, format="json"
    )
    body = assert_envelope(response, 422, "validation_failed")
    fields = body["details"]["fields"]
    assert fields["email"] == ["Enter a valid email address."]
    assert fields["count"] == ["This field is required."]
    assert fields["nested.1.a"] == ["A valid integer is required."]
    assert body["message"].startswith("email: ")


def test_body_that_is_not_an_object_is_422(anon_client):
    body = assert_envelope(
        anon_client.post("/probe/public", [1, 2], format="json"), 422, "validation_failed"
    )
    assert "non_field_errors" in body["details"]["fields"]


def test_unsupported_media_type(anon_client):
    response = anon_client.post("/probe/public", data="email=a", content_type="text/plain")
    body = assert_envelope(response, 415, "unsupported_media_type")
    assert body["message"] == (
        "Unsupported Content-Type text/plain: send the header Content-Type: application/json."
    )


def test_a_body_without_content_type_is_told_to_send_json(anon_client):
    response = anon_client.generic("POST", "/probe/public", b'{"email": "a"}', content_type="")
    body = assert_envelope(response, 415, "unsupported_media_type")
    assert body["message"] == (
        "The request has a body but no Content-Type: send the header "
        "Content-Type: application/json."
    )


def test_not_acceptable(anon_client):
    response = anon_client.get("/plans", HTTP_ACCEPT="application/xml")
    assert_envelope(response, 406, "not_acceptable")


@override_settings(MAX_JSON_BODY_BYTES=100)
def test_body_too_large(anon_client):
    payload = json.dumps({"email": "a@example.com", "pad": "x" * 200})
    body = assert_envelope(
        anon_client.post("/probe/public", data=payload, content_type="application/json"),
        413,
        "payload_too_large",
    )
    assert body["details"] == {"limit_bytes": 100}


def test_a_body_that_stops_arriving_is_bad_request(anon_client):
    class Stalled:  # a WSGI body whose client went away mid-body
        def read(self, size=-1):
            raise TimeoutError("timed out")

        def readline(self, size=-1):
            raise TimeoutError("timed out")

    response = anon_client.generic(
        "POST",
        "/probe/public",
        b'{"email": "a@example.com"}',
        content_type="application/json",
        **{"wsgi.input": Stalled()},
    )
    assert_envelope(response, 400, "bad_request")


def test_server_error_hides_the_trace():
    response = Client(raise_request_exception=False).get("/probe/crash")
    body = assert_envelope(response, 500, "internal_error")
    assert "SELECT" not in response.content.decode()
    assert "Traceback" not in response.content.decode()
    assert set(body) == {"code", "type", "message"}


@pytest.mark.parametrize("header", [None, "Basic dXNlcjpwYXNz", "ak_live_without_its_scheme"])
def test_missing_key_is_authentication_required(anon_client, header):
    headers = {} if header is None else {"HTTP_AUTHORIZATION": header}
    response = anon_client.get("/probe/private", **headers)
    body = assert_envelope(response, 401, "authentication_required")
    assert body["message"] == (
        "An API key is required: send the header Authorization: Bearer <API_KEY>."
    )
    assert response["WWW-Authenticate"] == "Bearer"


@pytest.mark.parametrize(
    "header",
    [
        "Bearer ak_live_unknownunknownunknownunknownunknownunknown1234",
        "Bearer not-a-key",
        "Bearer",
        "Bearer a b",
    ],
)
def test_bad_key_is_invalid_api_key(anon_client, header):
    response = anon_client.get("/probe/private", HTTP_AUTHORIZATION=header)
    body = assert_envelope(response, 401, "invalid_api_key")
    assert body["message"] == "The API key is not valid."
    assert response["WWW-Authenticate"] == "Bearer"


def test_valid_key_reaches_the_view(api_client, account):
    response = api_client.get("/probe/private")
    assert response.status_code == 200
    assert response.json() == {"account_id": str(account.id)}


@override_settings(DOCS_URL="https://docs.example.com")
def test_type_follows_docs_url(anon_client):
    assert anon_client.get("/nope").json()["type"] == "https://docs.example.com/errors/not_found"


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_code_has_a_docs_page(anon_client, code):
    response = anon_client.get(f"/docs/errors/{code}")
    assert response.status_code == 200
    page = response.content.decode()
    assert code in page
    assert str(ERROR_CODES[code].status) in page


def test_unknown_code_page_is_not_found(anon_client):
    assert_envelope(anon_client.get("/docs/errors/no_such_code"), 404, "not_found")


def test_error_index_lists_every_code(anon_client):
    page = anon_client.get("/docs/errors").content.decode()
    assert all(code in page for code in ERROR_CODES)


@pytest.mark.parametrize("code", sorted(ERROR_CODES))
def test_every_docs_page_is_rendered_not_raw_markdown(anon_client, code):
    page = anon_client.get(f"/docs/errors/{code}").content.decode()
    assert "`" not in page
    entry = ERROR_CODES[code]
    for span in re.findall(r"`([^`]+)`", entry.message + entry.description):
        assert f"<code>{html.escape(span, quote=False)}</code>" in page


def test_a_docs_page_escapes_its_text(anon_client):
    page = anon_client.get("/docs/errors/authentication_required").content.decode()
    assert "<code>Authorization: Bearer &lt;API_KEY&gt;</code>" in page


def test_the_index_renders_code_spans_too(anon_client):
    page = anon_client.get("/docs/errors").content.decode()
    assert "`" not in page


@pytest.mark.parametrize(
    ("path", "target"),
    [
        ("/docs/", "/docs"),
        ("/docs/errors/", "/docs/errors"),
        ("/docs/errors/rate_limited/", "/docs/errors/rate_limited"),
    ],
)
def test_the_human_pages_take_a_trailing_slash(anon_client, path, target):
    response = anon_client.get(path)
    assert response.status_code == 301
    assert response["Location"] == target
    assert anon_client.get(target).status_code == 200


def test_the_api_still_takes_none(anon_client):
    assert_envelope(anon_client.get("/plans/"), 404, "not_found")


def test_the_admins_view_site_goes_to_the_docs(admin_client):
    page = admin_client.get("/admin/").content.decode()
    assert '<a href="/docs">View site</a>' in page


def test_no_module_builds_a_405_outside_the_error_handler():
    """A plain Django view refuses a method through config.api.handlers (methods_allowed),
    which answers the envelope and `Allow`: no module builds that answer itself."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    apps = ["accounts", "billing", "config", "outreach", "plans", "webhooks"]
    allowed = {root / "config/api/handlers.py", root / "config/api/errors.py"}
    built = [
        str(path.relative_to(root))
        for app in apps
        for path in sorted((root / app).rglob("*.py"))
        if path not in allowed
        and re.search(r"status=405|\"method_not_allowed\"|HttpResponseNotAllowed", path.read_text())
    ]
    assert built == []
