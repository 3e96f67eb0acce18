"""Test settings: the production settings with test-only secrets and fast retries.

DATABASE_URL / REDIS_URL, when set, name the PostgreSQL and Redis servers (CI). Unset:
an embedded PostgreSQL of the tests' own and the embedded mode's filesystem broker.
"""

import os
import shutil
import sys
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-000000000000")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=")
# Test peers listen on loopback; the guard's own tests switch it off.
os.environ.setdefault("OUTBOUND_ALLOW_PRIVATE_NETWORKS", "true")
# Production's limit, whatever the mode the tests run in.
os.environ.setdefault("SIGNUP_RATE_LIMIT", "5")
os.environ.setdefault("WEBHOOK_RETRY_SCHEDULE", "0,0,0,0")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
os.environ.setdefault("BASE_URL", "http://testserver")
# Tests drive the scheduler themselves (eager Celery would run it, and send, inside the
# request that dispatched); the fast path has its own test.
os.environ.setdefault("SENDING_SCHEDULE_ON_DISPATCH", "false")
# The abuse guards are production's defaults, but the suite's fixtures predate them (no
# proven signup address, mailboxes on a sink without a login): their own tests turn them on.
os.environ.setdefault("SIGNUP_EMAIL_VERIFICATION", "false")
os.environ.setdefault("SMTP_REQUIRE_LOGIN", "false")
# No test asks the internet's DNS: the domain check tests start a DNS server of their own
# (tests/support/dns_server.py) and turn the recipient check on themselves.
os.environ.setdefault("RECIPIENT_DOMAIN_CHECK", "false")
os.environ.setdefault("RECIPIENT_PROVIDER_LOOKUP", "false")

# Under pytest-xdist each test process (gw0, gw1, ...) gets a Redis database of its
# own: its end-to-end Celery workers, queue purges and rate-limit buckets must not
# meet another process's. Worker subprocesses inherit the rewritten URL, and the URL
# it was rewritten from (they load these settings again, with the same
# PYTEST_XDIST_WORKER: the rewrite must give them the same database, not add the
# offset a second time).
_xdist_worker = os.environ.get("PYTEST_XDIST_WORKER", "")
if _xdist_worker.startswith("gw") and os.environ.get("REDIS_URL"):
    _redis = urlsplit(os.environ.setdefault("TEST_REDIS_URL_GIVEN", os.environ["REDIS_URL"]))
    # Database 0 (the default) maps test processes to 8..15; a URL naming another
    # database K starts them at K instead, so two test runs can share one Redis.
    _base = int(_redis.path.strip("/") or 0)
    _db = (_base or 8) + int(_xdist_worker[2:]) % 8
    os.environ["REDIS_URL"] = urlunsplit(_redis._replace(path=f"/{_db}"))

# The metrics' folder (config/metrics_folder.py) of the test process itself: one of its
# own, emptied as it starts, so its counters meet no other test process's nor `make
# run`'s. The workers and servers it starts inherit it, as a host's processes share one;
# they run without pytest and keep what they are given.
if "pytest" in sys.modules and not os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
    from config.metrics_folder import var_dir as _var_dir

    _metrics = _var_dir() / "test-metrics" / (_xdist_worker or "main")
    shutil.rmtree(_metrics, ignore_errors=True)
    _metrics.mkdir(parents=True)
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(_metrics)

from config import embedded_db  # noqa: E402
from config.settings import *  # noqa: E402,F403

if EMBEDDED:  # noqa: F405
    # With no DATABASE_URL the tests run on an embedded PostgreSQL of their own, beside
    # make run's (tests/support/database.py starts it).
    EMBEDDED_DATABASE_DIR = VAR_DIR / "test-postgres"  # noqa: F405
    DATABASES["default"]["HOST"] = str(embedded_db.socket_dir(EMBEDDED_DATABASE_DIR))  # noqa: F405

if CELERY_BROKER_URL == "filesystem://":  # noqa: F405
    # The embedded mode's broker, for the end-to-end tests' real workers: folders of this
    # test process's own (as each gets its own Redis database), shared with the workers it
    # starts (they load these settings with the same PYTEST_XDIST_WORKER).
    TEST_BROKER_DIR = VAR_DIR / "test-broker" / (_xdist_worker or "main")  # noqa: F405
    for _folder in ("queue", "processed", "control"):
        (TEST_BROKER_DIR / _folder).mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **CELERY_BROKER_TRANSPORT_OPTIONS,  # noqa: F405
        "control_folder": str(TEST_BROKER_DIR / "control"),
        "data_folder_in": str(TEST_BROKER_DIR / "queue"),
        "data_folder_out": str(TEST_BROKER_DIR / "queue"),
        "processed_folder": str(TEST_BROKER_DIR / "processed"),
    }

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # noqa: F405
