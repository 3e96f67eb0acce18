"""Header limits of the server as deployed (config/web.py): a header field up to 32 KB
reaches the service and gets the envelope; only past it does granian answer."""

import pytest
import requests

from tests.accounts.test_rate_limit_server import (
    _server_env,
    _stop,
    _web,
)
from tests.support.database import live_database_url


@pytest.mark.usefixtures("live_db")
def test_an_authorization_header_up_to_32_kb_gets_the_envelope(settings):
    env = _server_env(
        DATABASE_URL=live_database_url(),
        REDIS_URL=settings.REDIS_URL or None,
        RATE_LIMIT_KEY_PREFIX=settings.RATE_LIMIT_KEY_PREFIX,
    )
    process, url = _web(env)
    try:
        for size in (9_000, 30_000):
            response = requests.get(
                f"{url}/api_keys", headers={"Authorization": "Bearer " + "a" * size}, timeout=30
            )
            assert response.status_code == 401, response.text[:200]
            assert response.json()["code"] == "invalid_api_key"
        # Past the documented limit the server refuses the request itself.
        response = requests.get(
            f"{url}/api_keys", headers={"Authorization": "Bearer " + "a" * 60_000}, timeout=30
        )
        assert response.status_code == 431
    finally:
        _stop(process)
