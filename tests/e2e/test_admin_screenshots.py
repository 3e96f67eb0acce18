"""Screenshots of what staff and newcomers see, taken by headless Chromium at 1280x800
(docs/admin.md, "Screenshots"): the staff dashboard, the campaign list and `/`. Each is
checked for its size, for content (not a blank page: many colours, most of the page not
the background) and for fitting the window (nothing wider than 1280 px).

Chromium is driven through chromedriver's WebDriver protocol over HTTP (no client
library): a session on the live server, the staff member's session cookie set, each
page opened and captured. Debian's `chromium` and `chromium-driver` packages; skipped
with the reason where they are missing, failing where CI is set (.ci/run installs them).
The PNGs are written under the test's tmp_path."""

import base64
import os
import shutil
import subprocess

import pytest
import requests
from django.contrib.auth.models import User
from django.test import Client
from django.utils import timezone

from outreach.models.campaigns import CampaignStats
from outreach.models.mailboxes import SmtpCredential
from tests.outreach.dashboard_data import AnalyticsHourFactory, hours_ago
from tests.outreach.factories import CampaignFactory
from tests.support.png import png_colours, png_size
from tests.support.ports import free_port, wait_for_port

WIDTH, HEIGHT = 1280, 800
# What does not fit at 1280 px: the page wider than the window, and each box whose
# content is wider than the box it scrolls in (a list scrolling sideways hides its
# last columns).
OVERFLOWING = """
const found = [];
if (document.documentElement.scrollWidth > window.innerWidth) found.push("the page");
for (const e of document.querySelectorAll("body *")) {
  if (e.scrollWidth > e.clientWidth + 1 && ["auto", "scroll"].includes(getComputedStyle(e).overflowX))
    found.push(e.tagName + "#" + e.id + "." + e.className);
}
return found;
"""
TIMEOUT = 30


def _chromium() -> tuple[str, str]:
    browser = shutil.which("chromium")
    driver = shutil.which("chromedriver")
    if browser and driver:
        return browser, driver
    if os.environ.get("CI"):
        pytest.fail(
            "chromium or chromedriver is missing in CI (.ci/run installs Debian's chromium and chromium-driver)"
        )
    pytest.skip(
        "chromium and chromedriver not installed (apt-get install chromium chromium-driver); CI runs this"
    )


@pytest.fixture
def browser():
    """A WebDriver session of headless Chromium with a 1280x800 window: yields a function
    `call(method, path, body)` on it."""
    binary, driver = _chromium()
    port = free_port()
    process = subprocess.Popen(
        [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_for_port(port, process=process)
        base = f"http://127.0.0.1:{port}"
        options = {
            "binary": binary,
            # --no-sandbox: Chromium refuses to start as root with its sandbox.
            "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                     f"--window-size={WIDTH},{HEIGHT}", "--force-device-scale-factor=1"],
        }  # fmt: skip
        capabilities = {"alwaysMatch": {"goog:chromeOptions": options}}
        started = requests.post(
            f"{base}/session", json={"capabilities": capabilities}, timeout=TIMEOUT
        )
        assert started.status_code == 200, started.text
        session = f"{base}/session/{started.json()['value']['sessionId']}"

        def call(method: str, path: str, body: dict | None = None):
            answer = requests.request(method, session + path, json=body, timeout=TIMEOUT)
            assert answer.status_code == 200, answer.text
            return answer.json()["value"]

        # The viewport itself at 1280x800 (the window's size counts the browser's frame).
        metrics = {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False}
        call(
            "POST",
            "/goog/cdp/execute",
            {"cmd": "Emulation.setDeviceMetricsOverride", "params": metrics},
        )
        yield call
        requests.delete(session, timeout=TIMEOUT)
    finally:
        process.terminate()
        process.wait(timeout=TIMEOUT)


def _capture(call, url: str, path) -> bytes:
    call("POST", "/url", {"url": url})
    png = base64.b64decode(call("GET", "/screenshot"))
    path.write_bytes(png)
    overflowing = call("POST", "/execute/sync", {"script": OVERFLOWING, "args": []})
    assert overflowing == [], f"{url} does not fit {WIDTH} px: {overflowing}"
    return png


def _looks_like_a_page(png: bytes) -> None:
    assert png_size(png) == (WIDTH, HEIGHT)
    colours = png_colours(png)
    background_share = colours.most_common(1)[0][1] / (WIDTH * HEIGHT)
    assert len(colours) >= 30, "almost no colours: a blank page"
    assert background_share < 0.97, "the page is almost all background"


@pytest.fixture
def staff_cookie(live_db):
    """A superuser's session cookie, and a platform with something to show."""
    user = User.objects.create_superuser("screens", "screens@example.com", "pw-screens-1")
    for n in range(12):
        campaign = CampaignFactory(name=f"Spring launch {n} " + "with a long name " * 4)
        CampaignStats.objects.create(campaign=campaign, sent=90 + n, opened=40 + n, replied=n)
        SmtpCredential.objects.filter(campaigns=campaign).update(
            sent_count=90 + n, bounced_count=n, last_error_at=timezone.now()
        )
        AnalyticsHourFactory(account=campaign.account, hour=hours_ago(n * 20), sent=50 + 40 * n)
        AnalyticsHourFactory(
            account=campaign.account, hour=hours_ago(n * 7 + 1), sent=30, bounced_hard=n
        )
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


def test_the_dashboard_the_campaign_list_and_the_root_page_at_1280x800(
    browser, live_server, staff_cookie, tmp_path
):
    browser("POST", "/url", {"url": f"{live_server.url}/admin/login/"})
    browser(
        "POST", "/cookie", {"cookie": {"name": "sessionid", "value": staff_cookie, "path": "/"}}
    )
    pages = {
        "dashboard": "/admin/dashboard/",
        "campaigns": "/admin/outreach/campaign/",
        "mailboxes": "/admin/outreach/smtpcredential/",
        "root": "/",
    }
    for name, path in pages.items():
        png = _capture(browser, live_server.url + path, tmp_path / f"{name}.png")
        _looks_like_a_page(png)
    title = browser("GET", "/title")
    assert title == "Outreach Service API"
