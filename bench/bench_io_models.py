"""How to hold many SMTP sessions in one process: threads, gevent or asyncio.

    .venv/bin/pip install -e '.[bench]'           # gevent and aiosmtplib, bench only
    .venv/bin/python bench/bench_io_models.py --sessions 200

The measurement behind the engines' concurrency model (docs/engines.md). One SMTP sink
process (tests/support/smtp.py) answers every command 50 ms late and the end of DATA
200 ms late. Each model runs in a fresh process: N sessions at once, one connection
each, 5 messages of about 3 KB per session. Reported per model: wall time, the
process's CPU time (user + system) per message, and its peak resident memory. No
database: this isolates the cost of the sessions themselves.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

MESSAGES = 5
BODY = ("Hello there,\r\n" + "x" * 70 + "\r\n") * 36  # about 3 KB


def message(n: int) -> bytes:
    return (
        f"From: a@sender.example\r\nTo: r{n}@example.org\r\nSubject: hello {n}\r\n"
        f"Message-ID: <{n}@sender.example>\r\n\r\n{BODY}"
    ).encode()


def session_sync(port: int, n: int) -> None:
    import smtplib

    with smtplib.SMTP("127.0.0.1", port, timeout=60) as conn:
        for i in range(MESSAGES):
            conn.sendmail("a@sender.example", [f"r{n}-{i}@example.org"], message(n))


def run_threads(port: int, sessions: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=sessions) as pool:
        for future in [pool.submit(session_sync, port, n) for n in range(sessions)]:
            future.result()


def run_gevent(port: int, sessions: int) -> None:
    from gevent.pool import Pool

    pool = Pool(sessions)
    for greenlet in [pool.spawn(session_sync, port, n) for n in range(sessions)]:
        greenlet.get()


def run_asyncio(port: int, sessions: int) -> None:
    import asyncio

    import aiosmtplib

    async def session(n: int) -> None:
        smtp = aiosmtplib.SMTP(hostname="127.0.0.1", port=port, timeout=60, start_tls=False)
        await smtp.connect()
        for i in range(MESSAGES):
            await smtp.sendmail("a@sender.example", [f"r{n}-{i}@example.org"], message(n))
        await smtp.quit()

    async def main() -> None:
        await asyncio.gather(*(session(n) for n in range(sessions)))

    asyncio.run(main())


def child(model: str, port: int, sessions: int) -> None:
    """One model in this (fresh) process; prints its measurement as JSON."""
    if model == "gevent":
        from gevent import monkey

        monkey.patch_all()
    import resource

    started, cpu = time.perf_counter(), time.process_time()
    {"threads": run_threads, "gevent": run_gevent, "asyncio": run_asyncio}[model](port, sessions)
    wall, cpu = time.perf_counter() - started, time.process_time() - cpu
    rss_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps({"wall": wall, "cpu": cpu, "rss_mb": rss_kb / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=200)
    parser.add_argument("--models", default="threads,gevent,asyncio")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.port, args.sessions)
        return

    from _peers import process_stop, smtp_sink_start

    from tests.support.ports import free_port

    port = free_port()
    sink = smtp_sink_start(port=port, reply_delay=0.05, data_delay=0.2)
    try:
        messages = args.sessions * MESSAGES
        print(
            f"{args.sessions} sessions x {MESSAGES} messages; sink: every reply +50 ms, "
            "end of DATA +200 ms"
        )
        print(f"{'model':<8} {'wall s':>7} {'msg/s':>7} {'CPU ms/msg':>11} {'peak RSS MB':>12}")
        for model in args.models.split(","):
            done = subprocess.run(
                [sys.executable, __file__, "--child", model, "--port", str(port)]
                + ["--sessions", str(args.sessions)],
                capture_output=True,
                text=True,
                timeout=600,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )
            if done.returncode != 0:
                print(f"{model:<8} failed: {done.stderr.strip().splitlines()[-1:]}")
                continue
            result = json.loads(done.stdout.strip().splitlines()[-1])
            print(
                f"{model:<8} {result['wall']:>7.2f} {messages / result['wall']:>7.1f}"
                f" {1000 * result['cpu'] / messages:>11.2f} {result['rss_mb']:>12.1f}"
            )
    finally:
        process_stop(sink)


if __name__ == "__main__":
    main()
