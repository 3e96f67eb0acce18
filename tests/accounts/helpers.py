def assert_envelope(response, status: int, code: str) -> dict:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert body["code"] == code
    assert body["type"] == f"http://testserver/docs/errors/{code}"
    assert isinstance(body["message"], str) and body["message"]
    return body
