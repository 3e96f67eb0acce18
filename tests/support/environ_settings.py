"""The test settings plus one route that shows a request's WSGI environ
(tests/foundation/test_web_environ.py)."""

from config.settings_test import *  # noqa: F403

ROOT_URLCONF = "tests.support.environ_urls"
