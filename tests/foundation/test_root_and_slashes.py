"""Where a newcomer lands: `/` answers a small index, `/admin` redirects to the admin,
and a 404 for a path that exists without its trailing slash says so."""

import pytest

from tests.outreach.helpers import assert_error

pytestmark = pytest.mark.django_db


def test_the_root_is_an_index_of_where_to_go(anon_client):
    response = anon_client.get("/")
    assert response.status_code == 200
    assert response.json() == {
        "name": "Outreach Service API",
        "docs": "http://testserver/docs",
        "schema": "http://testserver/schema",
        "health": "http://testserver/health",
        "admin": "http://testserver/admin/",
        "errors": "http://testserver/docs/errors",
    }
    refused = anon_client.post("/")
    assert_error(refused, 405, "method_not_allowed")
    assert refused["Allow"] == "GET, HEAD"


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
