"""Test settings: the production settings with test-only secrets and fast retries.

DATABASE_URL / REDIS_URL, when set, still choose PostgreSQL and Redis.
"""

import os
from pathlib import Path

os.environ.setdefault("SECRET_KEY", "test-only-secret-key-not-for-production-use-000000000000")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "dGVzdC1vbmx5LWZpZWxkLWtleS0wMDAwMDAwMDAwMDA=")
os.environ.setdefault("WEBHOOK_ALLOW_PRIVATE_NETWORKS", "true")
os.environ.setdefault("WEBHOOK_RETRY_SCHEDULE", "0,0,0,0")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")
os.environ.setdefault("BASE_URL", "http://testserver")

from config.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
Path(STATIC_ROOT).mkdir(parents=True, exist_ok=True)  # noqa: F405
