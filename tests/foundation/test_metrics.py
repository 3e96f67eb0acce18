"""GET /metrics in-process: who may read it, what it shows, and that the exposition is
valid for Prometheus's own tools (the client library's parser, `promtool check metrics`).
The counters across processes, from a live stack, are in tests/e2e/test_metrics_live.py."""

import os
import shutil
import subprocess
import uuid
from datetime import timedelta

import pytest
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from config import metrics
from config.metrics_folder import folder_default, metrics_folder_prepare
from config.procfile import multiprocess_dir_reset
from outreach.models.contacts import ContactImport
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from tests.outreach.factories import CampaignFactory, CredentialFactory, EnrollmentFactory
from tests.webhooks.factories import WebhookFactory
from webhooks.events import event_emit

TOKEN = "metrics-token-for-tests"  # noqa: S105 - a test value
AUTH = {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def scrape(client) -> dict[str, dict]:
    """{family name: {"type", "help", "samples": {(name, labels...): value}}}."""
    response = client.get("/metrics", **AUTH)
    assert response.status_code == 200, response.content
    return families_of(response.content.decode())


def families_of(text: str) -> dict[str, dict]:
    found = {}
    for family in text_string_to_metric_families(text):
        found[family.name] = {
            "type": family.type,
            "help": family.documentation,
            "samples": {(s.name, *sorted(s.labels.items())): s.value for s in family.samples},
        }
    return found


def value(families, family: str, sample: str | None = None, **labels) -> float:
    key = (sample or family, *sorted(labels.items()))
    return families[family]["samples"][key]


# ------------------------------------------------------------------ who may read it


def test_it_is_the_404_of_an_unknown_route_when_no_token_is_set(client, settings):
    settings.METRICS_TOKEN = ""
    unknown = client.get("/no-such-route", **AUTH)
    response = client.get("/metrics", **AUTH)
    assert response.status_code == unknown.status_code == 404
    assert response.content == unknown.content
    assert response.json()["code"] == "not_found"


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"HTTP_AUTHORIZATION": "Bearer wrong-token"},
        {"HTTP_AUTHORIZATION": f"Bearer {TOKEN}x"},
        {"HTTP_AUTHORIZATION": f"Basic {TOKEN}"},
        {"HTTP_AUTHORIZATION": TOKEN},
        {"HTTP_AUTHORIZATION": "Bearer "},
    ],
    ids=["none", "wrong", "longer", "basic", "no-scheme", "empty"],
)
def test_without_the_token_it_is_the_404_of_an_unknown_route(client, token, headers):
    unknown = client.get("/no-such-route", **headers)
    response = client.get("/metrics", **headers)
    assert response.status_code == 404
    assert response.content == unknown.content
    assert response.get("Content-Type") == unknown.get("Content-Type")


@pytest.mark.parametrize("method", ["post", "put", "patch", "delete", "head", "options"])
def test_any_method_but_get_is_the_404_of_an_unknown_route(client, token, method):
    unknown = getattr(client, method)("/no-such-route", **AUTH)
    response = getattr(client, method)("/metrics", **AUTH)
    assert response.status_code == unknown.status_code == 404
    assert response.content == unknown.content


def test_with_the_token_it_answers_the_text_format(client, token):
    response = client.get("/metrics", **AUTH)
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=0.0.4")
    assert b"# HELP outreach_sends_total " in response.content


# ------------------------------------------------------------------ what it shows


def test_every_family_has_help_and_the_documented_type(client, token):
    families = scrape(client)
    expected = {
        "outreach_sends": "counter",
        "outreach_send_lateness_seconds": "histogram",
        "outreach_smtp_sessions_in_flight": "gauge",
        "outreach_webhook_attempts": "counter",
        "outreach_webhook_deliveries": "counter",
        "outreach_webhook_delivery_latency_seconds": "histogram",
        "outreach_imap_polls": "counter",
        "outreach_http_requests": "counter",
        "outreach_http_request_duration_seconds": "histogram",
        "outreach_send_backlog": "gauge",
        "outreach_send_backlog_oldest_seconds": "gauge",
        "outreach_mailboxes_unavailable": "gauge",
        "outreach_mailbox_provider_pauses": "gauge",
        "outreach_webhook_jobs": "gauge",
        "outreach_webhook_jobs_due": "gauge",
        "outreach_webhook_jobs_oldest_due_seconds": "gauge",
        "outreach_webhooks_disabled": "gauge",
        "outreach_contact_imports": "gauge",
        "outreach_celery_queue_length": "gauge",
        "outreach_metrics_database_up": "gauge",
    }
    assert {name: families[name]["type"] for name in expected} == expected
    assert all(families[name]["help"] for name in expected)
    # Every outcome and auth method is there from the start, at 0 or more.
    outcomes = {
        dict(key[1:])["outcome"]
        for key in families["outreach_sends"]["samples"]
        if key[0] == "outreach_sends_total"
    }
    assert outcomes == {"accepted", "deferred", "bounced", "failed", "unknown"}
    assert value(families, "outreach_metrics_database_up") == 1
    queues = {dict(key[1:])["queue"] for key in families["outreach_celery_queue_length"]["samples"]}
    assert queues == {"celery", "webhooks", "sending", "imports", "intake"}


@pytest.mark.synthetic_events  # backlog rows made with empty payloads
def test_the_state_gauges_count_what_the_database_holds(client, token):
    now = timezone.now()
    campaign = CampaignFactory()
    for minutes in (1, 10):
        EnrollmentFactory(
            campaign=campaign,
            status=Enrollment.Status.SCHEDULED,
            next_send_at=now - timedelta(minutes=minutes),
        )
    # Not due yet, and due but no longer active: neither is backlog.
    EnrollmentFactory(
        campaign=campaign,
        status=Enrollment.Status.SCHEDULED,
        next_send_at=now + timedelta(hours=1),
    )
    EnrollmentFactory(
        campaign=campaign,
        status=Enrollment.Status.REPLIED,
        next_send_at=now - timedelta(hours=1),
    )
    # Due longest, but in flight (its step handed to a sender, which keeps its due
    # time): not backlog either.
    in_flight = EnrollmentFactory(
        campaign=campaign,
        status=Enrollment.Status.SCHEDULED,
        next_send_at=now - timedelta(hours=2),
    )
    SendClaim.objects.create(
        enrollment=in_flight,
        batch_id=uuid.uuid4(),
        credential=campaign.credentials.first(),
        step=1,
        claimed_at=now,
        lease_until=now + timedelta(minutes=15),
    )
    CredentialFactory(disabled_at=now)
    CredentialFactory(
        auth_method=SmtpCredential.AuthMethod.OAUTH_GOOGLE,
        oauth_status=SmtpCredential.OAuthStatus.REAUTHORIZATION_REQUIRED,
    )
    webhook = WebhookFactory(account=campaign.account, event_filters=["*"])
    WebhookFactory(account=campaign.account, disabled_at=now)
    for _ in range(3):
        event_emit(account=campaign.account, event_type="campaign.paused", data={})
    ContactImport.objects.create(account=campaign.account, status="processing")

    families = scrape(client)

    assert value(families, "outreach_send_backlog") == 2
    assert 600 <= value(families, "outreach_send_backlog_oldest_seconds") < 700
    assert value(families, "outreach_mailboxes_unavailable", state="disabled") == 1
    assert value(families, "outreach_mailboxes_unavailable", state="reauthorization_required") == 1
    assert value(families, "outreach_webhook_jobs", state="pending") == 3
    assert value(families, "outreach_webhook_jobs", state="delivering") == 0
    assert value(families, "outreach_webhook_jobs_due") == 3
    assert value(families, "outreach_webhooks_disabled") == 1
    assert value(families, "outreach_contact_imports", status="processing") == 1
    assert value(families, "outreach_contact_imports", status="pending") == 0
    assert webhook.jobs.count() == 3


def test_a_scrape_reads_the_state_in_a_few_queries(client, token, django_assert_max_num_queries):
    # Six: the circuit breaker's pauses by provider are one more (one indexed count).
    with django_assert_max_num_queries(6):
        client.get("/metrics", **AUTH)


def test_http_requests_are_counted_by_route_pattern_never_by_path(client, token, api_client):
    before = scrape(client)
    api_client.get("/campaigns/00000000-0000-0000-0000-000000000000")
    client.generic("BREW", "/health")
    client.get("/no/such/path/ada@example.org")
    after = scrape(client)

    def moved(**labels):
        key = ("outreach_http_requests_total", *sorted(labels.items()))
        family = "outreach_http_requests"
        return after[family]["samples"][key] - before[family]["samples"].get(key, 0)

    assert moved(route="campaigns/(?P<pk>[^/.]+)", method="GET", status="404") == 1
    assert moved(route="health", method="other", status="405") == 1
    assert moved(route="unmatched", method="GET", status="404") == 1
    labels = {
        value for family in after.values() for key in family["samples"] for _, value in key[1:]
    }
    assert not [v for v in labels if "@" in v or "://" in v or "0000-0000" in v]


def test_a_send_outcome_moves_its_counter_and_lateness_by_one():
    labels = ("accepted", "oauth_microsoft")
    before = metrics.sends.labels(*labels)._value.get()
    late_before = _histogram_count(metrics.send_lateness)
    now = timezone.now()
    metrics.send_observe(
        outcome="accepted",
        auth_method="oauth_microsoft",
        due_at=now - timedelta(seconds=7),
        now=now,
    )
    metrics.send_observe(outcome="bounced", auth_method="oauth_microsoft", due_at=now, now=now)
    assert metrics.sends.labels(*labels)._value.get() == before + 1
    assert _histogram_count(metrics.send_lateness) == late_before + 1


def _histogram_count(histogram) -> float:
    [family] = histogram.collect()
    return next(s.value for s in family.samples if s.name.endswith("_count"))


# ------------------------------------------------------------------ Prometheus's own check


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("promtool is missing in CI (.ci/run installs Debian's prometheus)")
        pytest.skip("promtool not installed (apt-get install prometheus); CI runs this")
    return found


def test_the_exposition_passes_promtool_check_metrics(client, token):
    command = promtool()
    CampaignFactory()
    client.get("/health")
    body = client.get("/metrics", **AUTH).content
    result = subprocess.run(
        [command, "check", "metrics"], input=body, capture_output=True, timeout=30, check=False
    )
    assert result.returncode == 0, result.stdout.decode() + result.stderr.decode()
    assert result.stdout.decode().strip() == "", result.stdout.decode()


def test_the_multiprocess_folder_is_emptied_for_a_new_run(tmp_path):
    folder = tmp_path / "metrics"
    folder.mkdir()
    (folder / "counter_123.db").write_bytes(b"old run")
    multiprocess_dir_reset(folder)
    assert folder.is_dir() and list(folder.iterdir()) == []
    multiprocess_dir_reset(tmp_path / "new")
    assert (tmp_path / "new").is_dir()


def test_the_dashboard_queries_only_metrics_the_service_exposes(client, token):
    import json
    import re
    from pathlib import Path

    dashboard = json.loads(
        (Path(__file__).resolve().parents[2] / "docs" / "grafana-dashboard.json").read_text()
    )
    sample_names = {key[0] for family in scrape(client).values() for key in family["samples"]}
    queried = {
        name
        for panel in dashboard["panels"]
        for target in panel["targets"]
        for name in re.findall(r"outreach_[a-z_]+", target["expr"])
    }
    assert queried and queried <= sample_names, sorted(queried - sample_names)
    page = (Path(__file__).resolve().parents[2] / "docs" / "metrics.md").read_text()
    documented = " ".join(page.split())  # each panel's title, as its paragraph names it
    assert [p["title"] for p in dashboard["panels"] if p["title"] not in documented] == []


def test_the_filesystem_broker_queues_are_counted_by_their_message_files(settings, tmp_path):
    from config.metrics_scrape import broker_queue_lengths

    settings.CELERY_BROKER_URL = "filesystem://"
    settings.CELERY_BROKER_TRANSPORT_OPTIONS = {"data_folder_in": str(tmp_path)}
    for name in ("1_a.sending.msg", "2_b.sending.msg", "3_c.webhooks.msg", "4_d.other.msg"):
        (tmp_path / name).write_text("{}")
    (tmp_path / "stray.txt").write_text("")
    assert broker_queue_lengths() == {
        "celery": 0,
        "webhooks": 1,
        "sending": 2,
        "imports": 0,
        "intake": 0,
    }


# ------------------------------------------------------------ the folder of every process


def _exited_pid() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_without_a_folder_set_every_process_uses_the_services_own(tmp_path, monkeypatch):
    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    folder = folder_default(tmp_path)
    earlier_boot = tmp_path / "metrics" / "an-earlier-boot"
    earlier_boot.mkdir(parents=True)
    (earlier_boot / "counter_1.db").write_bytes(b"")
    (tmp_path / "metrics" / "counter_2.db").write_bytes(b"")  # an older layout's
    folder.mkdir()
    dead, alive = _exited_pid(), os.getpid()
    for name in (f"gauge_livesum_{dead}.db", f"counter_{dead}.db", f"gauge_livesum_{alive}.db"):
        (folder / name).write_bytes(b"")

    assert metrics_folder_prepare(tmp_path) == folder
    assert os.environ["PROMETHEUS_MULTIPROC_DIR"] == str(folder)
    assert folder.parent.name == "metrics" and folder.parent.parent == tmp_path
    assert list((tmp_path / "metrics").iterdir()) == [folder]
    # The exited process's live gauge is gone, its counter stays (a sum never goes down).
    assert sorted(p.name for p in folder.iterdir()) == [
        f"counter_{dead}.db",
        f"gauge_livesum_{alive}.db",
    ]
    assert metrics_folder_prepare(tmp_path) == folder  # the next process agrees


def test_a_folder_set_by_the_operator_is_used_as_it_is(tmp_path, monkeypatch):
    given = tmp_path / "run-metrics"
    given.mkdir()
    (given / f"gauge_livesum_{_exited_pid()}.db").write_bytes(b"")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(given))
    assert metrics_folder_prepare(tmp_path / "var") == given
    assert len(list(given.iterdir())) == 1
    assert not (tmp_path / "var").exists()


def test_a_folder_that_cannot_be_made_is_said_at_start(tmp_path, monkeypatch):
    from django.core.exceptions import ImproperlyConfigured

    monkeypatch.delenv("PROMETHEUS_MULTIPROC_DIR")
    var = tmp_path / "var"
    var.write_text("a file where the folder should be")
    with pytest.raises(ImproperlyConfigured, match="set PROMETHEUS_MULTIPROC_DIR"):
        metrics_folder_prepare(var)
