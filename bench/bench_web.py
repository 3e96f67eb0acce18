#!/usr/bin/env python
"""The web server the Procfile's `web:` line starts, against another checkout's (the
baseline), in alternated rounds in the same minutes.

Both web lines run at once (each through a shell, as honcho runs it, on a free port,
production mode, the same database and Redis, bench/auth_settings.py's routes); each
round measures one server then the other (the order alternating), with:

* `keepalive`: CLIENTS threads over 2 client processes, each on one kept-alive
  connection, GET /api_keys with an API key (the authenticated list path: key lookup,
  request count, rate limit, a list query), as fast as answers come;
* `new-conn`: the same, a new connection per request;
* `bare`: GET /bench/bare on kept-alive connections (no database): the server's own
  cost per request (an open-tracking pixel's hit is about as light).

Prints requests/s, p50 and p99 per server and the ratio this/baseline per round.

    git worktree add --detach ../web-base main
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 .venv/bin/python bench/bench_web.py --baseline ../web-base
"""

import argparse
import http.client
import multiprocessing
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._peers import process_stop  # noqa: E402
from bench.bench_auth import _environment, _prepare  # noqa: E402

CLIENT_PROCESSES = 2
LOGS = Path(tempfile.mkdtemp(prefix="bench-web-"))
MODES = {"keepalive": ("/api_keys", True), "new-conn": ("/api_keys", False)}
MODES["bare"] = ("/bench/bare", True)


def _web_line(checkout: Path) -> str:
    for line in (checkout / "Procfile").read_text().splitlines():
        name, _, command = line.partition(":")
        if name.strip() == "web":
            return command.strip()
    raise SystemExit(f"{checkout}/Procfile has no web: line")


def _start(checkout: Path, env: dict, workers: int, name: str):
    from tests.support.ports import free_port, wait_for_port

    port = free_port()
    env = env | {"BIND": f"127.0.0.1:{port}", "WEB_CONCURRENCY": str(workers)}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    process = subprocess.Popen(
        ["sh", "-c", _web_line(checkout)],
        cwd=checkout,
        env=env,
        start_new_session=True,
        stdout=(LOGS / f"{name}.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    wait_for_port(port, timeout=60, process=process)
    return process, port


def _client(port, path, keys, keepalive, seconds, start_at, results):
    latencies: list[float] = []
    statuses: set[int] = set()
    lock = threading.Lock()

    def run(thread_keys):
        local, n, conn = [], 0, None
        while time.time() < start_at:
            time.sleep(0.001)
        while time.time() < start_at + seconds:
            headers = {"Authorization": f"Bearer {thread_keys[n % len(thread_keys)]}"}
            n += 1
            began = time.perf_counter()
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            conn.request("GET", path, headers=headers)
            response = conn.getresponse()
            response.read()
            local.append(time.perf_counter() - began)
            statuses.add(response.status)
            if not keepalive or response.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=run, args=(k,)) for k in keys]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results.put((latencies, sorted(statuses)))


def _measure(port, mode, key_slices, seconds) -> tuple[float, float, float]:
    path, keepalive = MODES[mode]
    results: multiprocessing.Queue = multiprocessing.Queue()
    start_at = time.time() + 0.3
    processes = [
        multiprocessing.Process(
            target=_client, args=(port, path, keys, keepalive, seconds, start_at, results)
        )
        for keys in key_slices
    ]
    for process in processes:
        process.start()
    latencies: list[float] = []
    for _ in processes:
        got, statuses = results.get()
        if statuses != [200]:
            raise SystemExit(f"{mode}: answers {statuses}")
        latencies.extend(got)
    for process in processes:
        process.join()
    latencies.sort()
    p50, p99 = (latencies[int(len(latencies) * q)] * 1000 for q in (0.5, 0.99))
    return len(latencies) / seconds, p50, p99


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--baseline", type=Path, required=True, help="another checkout")
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--clients", type=int, default=16, help="client threads in all")
    parser.add_argument("--workers", type=int, default=2, help="WEB_CONCURRENCY")
    args = parser.parse_args()
    env = _environment()
    os.environ.update(env)
    keys, _ = _prepare()
    threads = args.clients // CLIENT_PROCESSES
    slices = [
        [
            keys[i :: threads * CLIENT_PROCESSES]
            for i in range(p, threads * CLIENT_PROCESSES, CLIENT_PROCESSES)
        ]
        for p in range(CLIENT_PROCESSES)
    ]
    servers = {}
    try:
        for name, checkout in (("this", ROOT), ("baseline", args.baseline.resolve())):
            # Both write their access line (gunicorn's whatever the level), to a file.
            servers[name] = _start(checkout, env | {"LOG_LEVEL": "INFO"}, args.workers, name)
            print(f"{name}: {_web_line(checkout)}")
        for name in servers:  # warm-up: every worker and thread up, every key used
            _measure(servers[name][1], "keepalive", slices, 2.0)
        print(f"load average before: {os.getloadavg()[0]:.1f}; {args.clients} clients")
        for pair in range(args.pairs):
            for mode in MODES:
                order = ["this", "baseline"] if pair % 2 == 0 else ["baseline", "this"]
                got = {n: _measure(servers[n][1], mode, slices, args.seconds) for n in order}
                line = "  ".join(
                    f"{n} {rate:5.0f}/s p50 {p50:5.1f} p99 {p99:6.1f} ms"
                    for n, (rate, p50, p99) in got.items()
                )
                ratio = got["this"][0] / got["baseline"][0]
                print(f"pair {pair + 1} {mode:9s} {line}  ratio {ratio:.2f}", flush=True)
        print(f"load average after: {os.getloadavg()[0]:.1f}; server logs in {LOGS}")
    finally:
        for process, _ in servers.values():
            process_stop(process, timeout=30)


if __name__ == "__main__":
    main()
