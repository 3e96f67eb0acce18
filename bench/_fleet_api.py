"""The fleet's world made as an operator makes it at a platform's size: through the HTTP
API of the Procfile's web server (bench/bench_fleet.py's `--setup api`), from a small pool
of client threads, one API key each.

* mailboxes: `POST /smtp_credentials`, one request each (each also checks the mailbox:
  the service opens an SMTP session to it before answering, API.md);
* campaigns: `POST /campaigns` with step 1 and `credential_ids`, which names at most 100
  mailboxes (the serializer's `max_length`): a fleet of N mailboxes is N / 100
  campaigns of 100;
* the dispatch: `POST /campaigns/:id/dispatch {all_pending: true}`, one per campaign.

Each key has 60 requests a minute (accounts.ratelimit.API_KEY_LIMIT, a constant) and an
account's keys share API_ACCOUNT_RATE_LIMIT (120 a minute by default): at the defaults
10,000 mailboxes take 83 minutes. An operator provisioning a fleet raises
API_ACCOUNT_RATE_LIMIT (the bench sets it in the service's environment, `RATE_LIMIT`) and
gives each provisioning thread its own key. A 429 is waited out (`Retry-After`) and
counted."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from _peers import api_call
from _setup import STEP

# The most mailboxes a campaign names through the API (CampaignSerializer.credential_ids).
CAMPAIGN_MAX_MAILBOXES = 100
# API_ACCOUNT_RATE_LIMIT in the service's environment for `--setup api`.
RATE_LIMIT = "100000"


@dataclass
class Calls:
    """What the API answered: statuses counted, 429s waited out, the first failures."""

    statuses: dict = field(default_factory=dict)
    limited: int = 0
    failures: list = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def call(self, method: str, path: str, *, key: str, body: dict) -> dict:
        """One request, repeated after each 429's Retry-After (and, up to 3 times, after
        a 5xx or a broken connection). Raises on any other failure."""
        tries = 0
        while True:
            try:
                status, answer = api_call(method, path, key=key, json_body=body, timeout=120)
            except OSError as error:
                status, answer = 0, {"error": str(error)}
            with self.lock:
                self.statuses[status] = self.statuses.get(status, 0) + 1
                if status == 429:
                    self.limited += 1
            if status in (200, 201):
                return answer
            if status == 429:
                time.sleep(2)  # (Retry-After is a header; the body has no time)
                continue
            tries += 1
            if (status == 0 or status >= 500) and tries <= 3:
                time.sleep(1)
                continue
            with self.lock:
                self.failures.append((status, path, str(answer)[:300]))
            raise RuntimeError(f"{method} {path} answered {status}: {str(answer)[:300]}")


def mailbox_body(i: int, *, port: int, pace: tuple[int, int]) -> dict:
    """Mailbox i as bench/_setup.py's mailboxes_create makes it: the sink on loopback, no
    TLS, no login, a daily limit no run reaches, the pace."""
    return {
        "from_email": f"mailbox{i}@sender{i}.example",
        "from_name": f"Mailbox {i}",
        "smtp_host": "127.0.0.1",
        "smtp_port": port,
        "smtp_security": "none",
        "daily_limit": 100_000,
        "min_interval_seconds": pace[0],
        "max_interval_seconds": pace[1],
    }


def _pooled(keys: list[str], bodies: list, work) -> list:
    """work(key, body) for each body, from one thread per key; results in order."""
    results: list = [None] * len(bodies)
    slots = list(range(len(bodies)))
    lock = threading.Lock()

    def thread(key: str) -> None:
        while True:
            with lock:
                if not slots:
                    return
                index = slots.pop()
            results[index] = work(key, bodies[index])

    with ThreadPoolExecutor(len(keys)) as pool:
        for future in [pool.submit(thread, key) for key in keys]:
            future.result()
    return results


def mailboxes_create(
    keys: list[str], count: int, *, port: int, pace: tuple[int, int], calls: Calls
) -> list[tuple[str, str]]:
    """`count` mailboxes through `POST /smtp_credentials`: [(id, from_email)] in order."""
    bodies = [mailbox_body(i, port=port, pace=pace) for i in range(count)]

    def create(key: str, body: dict) -> tuple[str, str]:
        answer = calls.call("POST", "/smtp_credentials", key=key, body=body)
        return answer["id"], answer["from_email"]

    return _pooled(keys, bodies, create)


def campaigns_create(
    keys: list[str], credential_ids: list[str], *, per_campaign: int, calls: Calls
) -> list[str]:
    """Campaigns of `per_campaign` mailboxes each (at most 100: the API's limit), step 1
    as bench/_setup.py's STEP: their ids, in the mailboxes' order."""
    groups = [
        credential_ids[start : start + per_campaign]
        for start in range(0, len(credential_ids), per_campaign)
    ]
    bodies = [
        {
            "name": f"fleet {n}",
            "steps": [{**STEP, "delay_minutes": 0}],
            "credential_ids": group,
        }
        for n, group in enumerate(groups)
    ]

    def create(key: str, body: dict) -> str:
        return calls.call("POST", "/campaigns", key=key, body=body)["id"]

    return _pooled(keys, bodies, create)


def campaigns_dispatch(keys: list[str], campaign_ids: list[str], *, calls: Calls) -> list:
    """`POST /campaigns/:id/dispatch {all_pending: true}` for each campaign, from the
    pool: [(campaign id, dispatched, seconds the request took)]."""

    def dispatch(key: str, campaign_id: str) -> tuple:
        started = time.perf_counter()
        answer = calls.call(
            "POST", f"/campaigns/{campaign_id}/dispatch", key=key, body={"all_pending": True}
        )
        return campaign_id, answer.get("dispatched"), time.perf_counter() - started

    return _pooled(keys, campaign_ids, dispatch)
