"""Settings of bench/bench_auth.py: the service's settings plus one bare route."""

from config.settings import *  # noqa: F403

ROOT_URLCONF = "bench.auth_urls"
