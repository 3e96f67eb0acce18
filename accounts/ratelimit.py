"""Fixed-window rate limits, exact across processes.

One atomic operation per hit:

* Redis (settings.REDIS_URL set): a Lua script does INCR and sets the window's
  expiry on the first hit, and returns the count and the time left.
* Otherwise (the embedded mode, or no Redis) an SQL upsert on
  accounts.RateLimitBucket, shared by every web worker, increments the bucket or
  restarts its window, and returns the same two numbers.

A window starts at the first hit of a bucket and lasts `period` seconds; every
hit inside it counts, refused ones included, so a client hammering through a 429
does not get a fresh allowance. Retry-After is the time left in the window.

If Redis cannot be reached the limiter counts in the SQL store instead (a warning
is logged) and leaves Redis alone for REDIS_RETRY_SECONDS before trying it again, so
an outage costs one connection timeout per process, not one per request. The limits
stay enforced through the outage, exactly within each store; a window that spans
the switch between stores restarts, so a key can get at most one extra allowance
then.
"""

import logging
import math
import time
from dataclasses import dataclass

import redis
from django.conf import settings
from django.db import connection

from accounts.models import RateLimitBucket

logger = logging.getLogger(__name__)

# Rate limits do not vary by plan: 60 requests a minute per API key, and
# settings.API_ACCOUNT_RATE_LIMIT a minute for all the keys of an account together (more
# keys are no more requests); signups per client IP per hour: settings.SIGNUP_RATE_LIMIT
# (5 in production).
API_KEY_LIMIT = 60
API_KEY_PERIOD = 60
SIGNUP_PERIOD = 3600
# New signup verification links per account (POST /signup/verification).
VERIFICATION_EMAIL_LIMIT = 5
VERIFICATION_EMAIL_PERIOD = 3600
# Failed authentications (unknown, malformed or revoked keys) per client IP. Over it,
# every authentication from that IP is refused until the window ends, valid keys
# included, so guessing keys gains nothing.
AUTH_FAILURE_LIMIT = 20
AUTH_FAILURE_PERIOD = 60

REDIS_SOCKET_TIMEOUT_SECONDS = 0.5
REDIS_RETRY_SECONDS = 5.0  # after a Redis error, the SQL store counts for this long

# KEYS: the buckets; ARGV[1] window length in ms. Returns {count, ms left} of each.
_HIT_SCRIPT = """
local out = {}
for _, key in ipairs(KEYS) do
  local count = redis.call('INCR', key)
  local left = redis.call('PTTL', key)
  if left < 0 then
    redis.call('PEXPIRE', key, ARGV[1])
    left = tonumber(ARGV[1])
  end
  out[#out + 1] = count
  out[#out + 1] = left
end
return out
"""


@dataclass(frozen=True)
class RateLimitDecision:
    policy: str  # Name in the RateLimit / RateLimit-Policy headers.
    limit: int
    period: int  # seconds
    count: int  # hits in the current window, this one included
    reset_after: int  # whole seconds until the window ends (at least 1)

    @property
    def allowed(self) -> bool:
        return self.count <= self.limit

    @property
    def remaining(self) -> int:
        return max(0, self.limit - self.count)

    def headers(self) -> dict[str, str]:
        """IETF draft-ietf-httpapi-ratelimit-headers fields."""
        return {
            "RateLimit-Policy": f'"{self.policy}";q={self.limit};w={self.period}',
            "RateLimit": f'"{self.policy}";r={self.remaining};t={self.reset_after}',
        }


_redis_clients: dict[str, redis.Redis] = {}
_redis_unavailable_until = 0.0  # time.monotonic(); per process


def _redis(url: str) -> redis.Redis:
    # One pool per process (redis-py resets it after a fork).
    client = _redis_clients.get(url)
    if client is None:
        client = redis.Redis.from_url(
            url,
            socket_timeout=REDIS_SOCKET_TIMEOUT_SECONDS,
            socket_connect_timeout=REDIS_SOCKET_TIMEOUT_SECONDS,
        )
        client.hit_script = client.register_script(_HIT_SCRIPT)  # type: ignore[attr-defined]
        _redis_clients[url] = client
    return client


def _hit_redis(url: str, buckets: list[str], period_ms: int) -> list[tuple[int, int]]:
    flat = _redis(url).hit_script(keys=buckets, args=[period_ms])  # type: ignore[attr-defined]
    return [(int(flat[i]), int(flat[i + 1])) for i in range(0, len(flat), 2)]


def _hit_sql(buckets: list[str], period_ms: int) -> list[tuple[int, int]]:
    now_ms = int(time.time() * 1000)
    table = RateLimitBucket._meta.db_table
    # One statement: insert each bucket, or count the hit in its window, or restart an
    # expired window. SET expressions read the row as it was before the update.
    rows = ", ".join(["(%s, %s, 1)"] * len(buckets))
    sql = (
        f"INSERT INTO {table} (bucket, window_started_ms, count) VALUES {rows} "  # noqa: S608 (our table)
        "ON CONFLICT (bucket) DO UPDATE SET "
        f"count = CASE WHEN {table}.window_started_ms <= %s THEN 1 ELSE {table}.count + 1 END, "
        f"window_started_ms = CASE WHEN {table}.window_started_ms <= %s "
        f"THEN excluded.window_started_ms ELSE {table}.window_started_ms END "
        "RETURNING bucket, count, window_started_ms"
    )
    expired_before = now_ms - period_ms
    values = [value for bucket in buckets for value in (bucket, now_ms)]
    with connection.cursor() as cursor:
        cursor.execute(sql, [*values, expired_before, expired_before])
        counted = {bucket: (count, started) for bucket, count, started in cursor.fetchall()}
    return [
        (int(counted[bucket][0]), int(counted[bucket][1]) + period_ms - now_ms)
        for bucket in buckets
    ]


@dataclass(frozen=True)
class Limit:
    policy: str
    identity: str
    limit: int


def rate_limit_hits(*, limits: list[Limit], period: int) -> list[RateLimitDecision]:
    """Count one hit on each limit's `<policy>:<identity>` bucket (their windows all
    `period` long), in one operation, and say of each whether it is within its limit."""
    buckets = [f"{settings.RATE_LIMIT_KEY_PREFIX}:{item.policy}:{item.identity}" for item in limits]
    period_ms = period * 1000
    global _redis_unavailable_until
    counted = None
    if settings.REDIS_URL and time.monotonic() >= _redis_unavailable_until:
        try:
            counted = _hit_redis(settings.REDIS_URL, buckets, period_ms)
        except redis.RedisError as exc:
            _redis_unavailable_until = time.monotonic() + REDIS_RETRY_SECONDS
            logger.warning(
                "rate limiter: redis unavailable (%s), counting in the database for %.0f s",
                type(exc).__name__,
                REDIS_RETRY_SECONDS,
            )
    if counted is None:
        counted = _hit_sql(buckets, period_ms)
    return [
        RateLimitDecision(
            policy=item.policy,
            limit=item.limit,
            period=period,
            count=count,
            reset_after=min(period, max(1, math.ceil(left_ms / 1000))),
        )
        for item, (count, left_ms) in zip(limits, counted, strict=True)
    ]


def rate_limit_hit(*, policy: str, identity: str, limit: int, period: int) -> RateLimitDecision:
    """Count one hit on `<policy>:<identity>` and say whether it is within the limit."""
    (decision,) = rate_limit_hits(limits=[Limit(policy, identity, limit)], period=period)
    return decision


def _peek_redis(url: str, bucket: str) -> tuple[int, int]:
    client = _redis(url)
    with client.pipeline(transaction=False) as pipe:
        pipe.get(bucket)
        pipe.pttl(bucket)
        count, left_ms = pipe.execute()
    return int(count or 0), max(0, int(left_ms or 0))


def _peek_sql(bucket: str, period_ms: int) -> tuple[int, int]:
    now_ms = int(time.time() * 1000)
    row = (
        RateLimitBucket.objects.filter(bucket=bucket, window_started_ms__gt=now_ms - period_ms)
        .values_list("count", "window_started_ms")
        .first()
    )
    if row is None:
        return 0, 0
    return int(row[0]), int(row[1]) + period_ms - now_ms


def rate_limit_over(
    *, policy: str, identity: str, limit: int, period: int
) -> RateLimitDecision | None:
    """The bucket's decision when it is already over `limit`, without counting a hit;
    None while it is within (the common case: one read)."""
    bucket = f"{settings.RATE_LIMIT_KEY_PREFIX}:{policy}:{identity}"
    period_ms = period * 1000
    counted = None
    if settings.REDIS_URL and time.monotonic() >= _redis_unavailable_until:
        try:
            counted = _peek_redis(settings.REDIS_URL, bucket)
        except redis.RedisError:
            counted = None
    count, left_ms = counted if counted is not None else _peek_sql(bucket, period_ms)
    if count < limit:
        return None
    reset_after = min(period, max(1, math.ceil(left_ms / 1000)))
    return RateLimitDecision(
        policy=policy, limit=limit, period=period, count=count, reset_after=reset_after
    )


def rate_limit_buckets_prune(*, now_ms: int | None = None) -> int:
    """Delete SQL buckets whose window ended more than a day ago (the longest
    window is an hour). Redis expires its keys by itself."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    cutoff = now_ms - (SIGNUP_PERIOD + 24 * 3600) * 1000
    deleted, _ = RateLimitBucket.objects.filter(window_started_ms__lt=cutoff).delete()
    return deleted
