def assert_error(response, status: int, code: str) -> dict:
    """The error envelope (docs/api.md) with this status and code."""
    assert response.status_code == status, response.content
    body = response.json()
    assert body["code"] == code, body
    assert body["type"] == f"http://testserver/docs/errors/{code}"
    assert isinstance(body["message"], str) and body["message"]
    return body


def assert_fields(response, *fields: str) -> dict:
    """422 validation_failed naming exactly these fields."""
    body = assert_error(response, 422, "validation_failed")
    assert set(body["details"]["fields"]) == set(fields), body["details"]
    return body["details"]["fields"]
