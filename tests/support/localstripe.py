"""localstripe, a local Stripe API peer, for the tests that talk to Stripe.

`localstripe` (session-scoped) starts the server on a free port; the
`stripe_settings` fixture points the service at it (STRIPE_API_BASE) for one test.
localstripe implements customers, products, plans, subscriptions, invoices and
webhooks; it has no prices, Checkout or Billing Portal (those are tested against
recorded responses at the HTTP boundary).
"""

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import requests

from tests.support.ports import free_port, wait_for_port

STRIPE_TEST_KEY = "sk_test_localstripe"


@dataclass(frozen=True)
class LocalStripe:
    url: str

    def get(self, path: str) -> dict:
        response = requests.get(f"{self.url}{path}", auth=(STRIPE_TEST_KEY, ""), timeout=10)
        response.raise_for_status()
        return response.json()

    def post(self, path: str, data: dict) -> dict:
        response = requests.post(
            f"{self.url}{path}", data=data, auth=(STRIPE_TEST_KEY, ""), timeout=10
        )
        response.raise_for_status()
        return response.json()

    def flush(self) -> None:
        requests.delete(f"{self.url}/_config/data", timeout=10).raise_for_status()


def _localstripe_start(log) -> tuple[subprocess.Popen, int]:
    """Start localstripe on a free port; another try on another port if it could not
    listen (the port taken meanwhile)."""
    executable = Path(sys.executable).with_name("localstripe")
    for attempt in range(3):
        port = free_port()
        process = subprocess.Popen(
            [str(executable), "--port", str(port)], stdout=log, stderr=subprocess.STDOUT
        )
        try:
            wait_for_port(port, timeout=60, process=process)  # slow to import when loaded
        except ChildProcessError:
            if attempt == 2:
                raise
            continue
        return process, port
    raise AssertionError("unreachable")


@pytest.fixture(scope="session")
def localstripe(tmp_path_factory):
    log_path = tmp_path_factory.mktemp("localstripe") / "localstripe.log"
    with log_path.open("wb") as log:
        try:
            process, port = _localstripe_start(log)
        except (ChildProcessError, TimeoutError) as exc:
            raise RuntimeError(f"{exc}; localstripe said:\n{log_path.read_text()[-4000:]}") from exc
        try:
            yield LocalStripe(url=f"http://127.0.0.1:{port}")
        finally:
            process.terminate()
            process.wait(timeout=10)


@pytest.fixture
def stripe_settings(localstripe, settings):
    """Configure the payment provider against localstripe for this test."""
    localstripe.flush()
    settings.STRIPE_SECRET_KEY = STRIPE_TEST_KEY
    settings.STRIPE_API_BASE = localstripe.url
    settings.STRIPE_WEBHOOK_SECRET = "whsec_test_localstripe"
    return localstripe
