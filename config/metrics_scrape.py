"""`GET /metrics`: the Prometheus text exposition, and what only a scrape computes.

- The view answers only when `METRICS_TOKEN` is set and the request is a GET carrying
  `Authorization: Bearer <token>` (compared in constant time). Any other request gets
  the very 404 of an unknown route, so the endpoint reveals nothing, not even that it
  exists.
- It exposes the counters and histograms of every process (config/metrics.py: the
  multi-process folder's files, or this process's memory), then the state read from
  the database and the broker now (`StateCollector`): a handful of indexed queries,
  timed in bench/bench_metrics.py.
- `HttpMetricsMiddleware` counts each request by route pattern (`campaigns/<pk>`, never
  the path), method (the known ones; anything else is `other`) and status code.
"""

import hmac
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from django.conf import settings
from django.db import DatabaseError
from django.http import Http404, HttpResponse
from django.views.decorators.csrf import csrf_exempt
from prometheus_client import REGISTRY, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4
from prometheus_client.multiprocess import MultiProcessCollector

from config import metrics

logger = logging.getLogger(__name__)

KNOWN_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


# ----------------------------------------------------------------- state, read now


# Readers of the database's state, registered by the apps that own the tables (their
# AppConfig.ready: config imports no app). Each yields metric families.
_state_readers: list[Callable[[], Iterable[Metric]]] = []


def state_reader_register(reader: Callable[[], Iterable[Metric]]) -> None:
    if reader not in _state_readers:
        _state_readers.append(reader)


class StateCollector:
    """Gauges of state the database and the broker hold, read at scrape time."""

    def collect(self) -> Iterator[Metric]:
        started = time.monotonic()
        up = GaugeMetricFamily(
            "outreach_metrics_database_up",
            "1 when this scrape could read the database gauges, 0 when it could not.",
        )
        try:
            # Read whole before any is yielded: a scrape shows all of them or none.
            families = [family for reader in _state_readers for family in reader()]
        except DatabaseError:
            logger.warning("metrics: database gauges unavailable", exc_info=True)
            families = []
            up.add_metric([], 0)
        else:
            up.add_metric([], 1)
        yield from families
        yield up
        yield from self._queues()
        took = GaugeMetricFamily(
            "outreach_metrics_state_seconds",
            "Seconds this scrape spent reading the database and broker gauges.",
        )
        took.add_metric([], time.monotonic() - started)
        yield took

    def _queues(self) -> Iterator[Metric]:
        family = GaugeMetricFamily(
            "outreach_celery_queue_length",
            "Tasks waiting on the broker, by queue.",
            labels=["queue"],
        )
        try:
            lengths = broker_queue_lengths()
        except Exception:  # noqa: BLE001 - a broker down must not fail the scrape
            logger.warning("metrics: broker queue lengths unavailable", exc_info=True)
            lengths = {}
        for name, length in lengths.items():
            family.add_metric([name], length)
        yield family


def age_seconds(then, now) -> float:
    """Seconds from `then` to `now`, 0 when `then` is None or ahead."""
    return max(0.0, (now - then).total_seconds()) if then is not None else 0.0


def broker_queue_lengths() -> dict[str, int]:
    """Messages waiting in each declared queue: LLEN on Redis, or the message files of
    the filesystem broker (named `<time>_<uuid>.<queue>.msg`)."""
    names = [queue.name for queue in settings.CELERY_TASK_QUEUES]
    if settings.CELERY_BROKER_URL == "filesystem://":
        folder = Path(str(settings.CELERY_BROKER_TRANSPORT_OPTIONS["data_folder_in"]))
        counts = dict.fromkeys(names, 0)
        for path in folder.iterdir():
            queue = path.name.rsplit(".", 2)[-2] if path.name.endswith(".msg") else ""
            if queue in counts:
                counts[queue] += 1
        return counts
    import redis

    client = redis.Redis.from_url(
        settings.CELERY_BROKER_URL, socket_timeout=2, socket_connect_timeout=2
    )
    try:
        pipe = client.pipeline(transaction=False)
        for name in names:
            pipe.llen(name)
        return dict(zip(names, pipe.execute(), strict=True))
    finally:
        client.close()


# ------------------------------------------------------------------------ the view


class _Exposition:
    """What one scrape exposes: every process's counters, then the state read now."""

    def collect(self) -> Iterator[Metric]:
        folder = metrics.multiprocess_dir()
        if folder is not None:
            yield from MultiProcessCollector(None, path=str(folder)).collect()
        else:
            yield from REGISTRY.collect()
        yield from StateCollector().collect()


def _authorized(request) -> bool:
    token = settings.METRICS_TOKEN
    if not token or request.method != "GET":
        return False
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.encode())


@csrf_exempt
def metrics_view(request):
    """GET /metrics (module docstring); the 404 of an unknown route otherwise."""
    if not _authorized(request):
        raise Http404
    return HttpResponse(generate_latest(_Exposition()), content_type=CONTENT_TYPE_PLAIN_0_0_4)


# -------------------------------------------------------------------- HTTP requests


class HttpMetricsMiddleware:
    """Counts and times every request (outermost, so errors the other middleware
    answer are counted too). The route is the URL pattern that matched, `unmatched`
    when none did."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        route = _route(match)
        method = request.method if request.method in KNOWN_METHODS else "other"
        metrics.http_requests.labels(route, method, str(response.status_code)).inc()
        metrics.http_duration.labels(route).observe(time.perf_counter() - started)
        return response


def _route(match) -> str:
    """The matched URL pattern, without a regex's anchors (the API's routers use
    regexes): `campaigns/(?P<pk>[^/.]+)`, `webhooks/<uuid:pk>`; `unmatched` when none."""
    if match is None or not match.route:
        return "unmatched"
    return match.route.removeprefix("^").removesuffix("$")
