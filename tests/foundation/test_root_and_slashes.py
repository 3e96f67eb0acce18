"""Where a newcomer lands: `/` answers a small index, `/admin` redirects to the admin,
and a 404 for a path that exists without its trailing slash says so."""

import pytest

from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


ROOT_JSON = {
    "name": "Outreach Service API",
    "docs": "http://testserver/docs",
    "schema": "http://testserver/schema",
    "health": "http://testserver/health",
    "admin": "http://testserver/admin/",
    "errors": "http://testserver/docs/errors",
}
BROWSER = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize(
    "accept",
    [
        None,  # Python's urllib, many HTTP libraries
        "*/*",  # curl
        "application/json",
        "application/json, text/html",  # equal preference: JSON first
        "text/html;q=0.5, application/json",
        "application/xml",  # neither: the JSON it always was
    ],
)
def test_a_client_gets_the_root_as_json(anon_client, accept):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    response = anon_client.get("/", **headers)
    assert response.status_code == 200
    assert response["Content-Type"] == "application/json"
    assert response.json() == ROOT_JSON
    assert "Accept" in response["Vary"]
    refused = anon_client.post("/")
    assert_error(refused, 405, "method_not_allowed")
    assert refused["Allow"] == "GET, HEAD"


@pytest.mark.parametrize("accept", [BROWSER, "text/html", "text/html, application/json"])
def test_a_browser_gets_the_root_as_a_page_of_where_to_go(anon_client, accept):
    response = anon_client.get("/", HTTP_ACCEPT=accept)
    assert response.status_code == 200
    assert response["Content-Type"] == "text/html; charset=utf-8"
    assert "Accept" in response["Vary"]
    page = response.content.decode()
    assert "<title>Outreach Service API</title>" in page
    for name in ("docs", "schema", "health", "admin", "errors"):
        path = ROOT_JSON[name].removeprefix("http://testserver")
        assert f'<a href="{ROOT_JSON[name]}"><code>{path}</code></a>' in page
    assert "<code>Authorization: Bearer &lt;API_KEY&gt;</code>" in page
    # Nothing fetched from elsewhere: no script, no stylesheet but its own.
    assert "<script" not in page and "<link" not in page and "@import" not in page


def test_admin_without_its_slash_redirects(anon_client):
    response = anon_client.get("/admin")
    assert response.status_code == 301
    assert response["Location"] == "/admin/"


@pytest.mark.parametrize("path", ["/contacts/", "/webhooks/", "/health/", "/webhook_event_types/"])
def test_a_trailing_slash_is_named_as_the_problem(api_client, path):
    body = assert_error(api_client.get(path), 404, "not_found")
    bare = path.rstrip("/")
    assert body["message"] == f"No such route: the API's paths take no trailing slash. Try {bare}"
    assert body["details"] == {"path": bare}


def test_an_unknown_route_is_a_plain_404(api_client):
    body = assert_error(api_client.get("/nothing/here/"), 404, "not_found")
    assert body["message"] == "No such route."
    assert "details" not in body
