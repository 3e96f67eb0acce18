"""The test peers' latency options (tests/support/smtp.py, tests/support/receiver.py):
slow replies without one session holding up another, and peers that never answer.
The latency benchmarks (bench/bench_latency_*.py) stand on these."""

import random
import smtplib
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import requests

from tests.support.ports import free_port, wait_for_port

ROOT = Path(__file__).resolve().parents[2]
EARLY = 0.02  # a timer may fire this much before its time


def _send(host: str, port: int, n: int = 0) -> None:
    with smtplib.SMTP(host, port, timeout=20) as conn:
        conn.sendmail("from@example.com", [f"to{n}@example.org"], b"Subject: x\r\n\r\nbody\r\n")


def test_smtp_reply_delay_applies_to_each_reply_once_and_data_delay_to_the_end_of_data(
    smtp_sink,
):
    sink = smtp_sink(reply_delay=0.2, data_delay=0.4)
    started = time.monotonic()
    conn = smtplib.SMTP(sink.host, sink.port, timeout=10)
    banner = time.monotonic() - started
    started = time.monotonic()
    conn.ehlo()
    ehlo = time.monotonic() - started
    started = time.monotonic()
    conn.sendmail("from@example.com", ["to@example.org"], b"Subject: x\r\n\r\nbody\r\n")
    transaction = time.monotonic() - started
    conn.quit()

    assert banner >= 0.2 - EARLY
    # One delay for the multi-line EHLO reply, not one per line (5 lines: >= 1 s).
    assert 0.2 - EARLY <= ehlo < 0.7
    # MAIL, RCPT and DATA's 354 wait 0.2 s each, the reply to the end of DATA 0.4 s.
    assert transaction >= 0.6 + 0.4 - 4 * EARLY
    assert [m.rcpt_tos for m in sink.wait_for(1)] == [["to@example.org"]]


def test_smtp_delays_do_not_serialise_concurrent_sessions(smtp_sink):
    sink = smtp_sink(reply_delay=0.2, data_delay=0.2)
    sessions = 200  # each ~1.4 s of replies: one after another would take minutes
    errors = []

    def run(n):
        try:
            _send(sink.host, sink.port, n)
        except Exception as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(sessions)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started

    assert errors == []
    assert len(sink.wait_for(sessions)) == sessions
    assert elapsed < 10, elapsed


def test_smtp_hang_accepts_the_connection_and_never_answers(smtp_sink):
    sink = smtp_sink(hang=True)
    with (
        socket.create_connection((sink.host, sink.port), timeout=0.5) as sock,
        pytest.raises(TimeoutError),
    ):
        sock.recv(1)  # not even the banner
    with pytest.raises((TimeoutError, smtplib.SMTPServerDisconnected)):
        smtplib.SMTP(sink.host, sink.port, timeout=0.5)
    assert sink.messages == []


def test_smtp_script_mode_logs_each_accepted_message_after_its_delays(tmp_path):
    port, log = free_port(), tmp_path / "sink.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.smtp", "--port", str(port)]
        + ["--reply-delay", "0.05", "--data-delay", "0.3", "--log", str(log)],
        cwd=ROOT,
    )
    try:
        wait_for_port(port, process=process)
        before = time.time()
        _send("127.0.0.1", port, 7)
        line = log.read_text().split()
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert line[1:] == ["from@example.com", "to7@example.org"]
    assert float(line[0]) >= before + 3 * 0.05 + 0.3 - 4 * EARLY


def test_smtp_reply_delay_range_draws_a_delay_for_each_reply(smtp_sink, monkeypatch):
    draws = []
    uniform = random.uniform

    def recorded(low, high):
        draws.append((low, high))
        return uniform(low, high)

    monkeypatch.setattr(random, "uniform", recorded)
    sink = smtp_sink(reply_delay_range=(0.1, 0.2))
    draws.clear()  # the banner of the sink's own start-up check
    started = time.monotonic()
    conn = smtplib.SMTP(sink.host, sink.port, timeout=10)
    conn.ehlo()
    conn.sendmail("from@example.com", ["to@example.org"], b"Subject: x\r\n\r\nbody\r\n")
    conn.quit()
    elapsed = time.monotonic() - started

    # Banner, EHLO (once for its lines), MAIL, RCPT, DATA's 354, end of DATA, QUIT.
    assert draws == [(0.1, 0.2)] * 7
    assert elapsed >= 7 * 0.1 - 7 * EARLY
    assert [m.rcpt_tos for m in sink.wait_for(1)] == [["to@example.org"]]


def test_smtp_hang_data_from_never_answers_those_senders_end_of_data(smtp_sink):
    sink = smtp_sink(hang_data_from={"Stuck@Example.com"})
    with (
        smtplib.SMTP(sink.host, sink.port, timeout=1) as conn,
        pytest.raises((TimeoutError, smtplib.SMTPServerDisconnected)),
    ):
        conn.sendmail("stuck@example.com", ["a@example.org"], b"Subject: x\r\n\r\nbody\r\n")
    # Another sender on the same sink meanwhile: answered.
    _send(sink.host, sink.port, 1)
    assert [(m.mail_from, m.rcpt_tos) for m in sink.messages] == [
        ("from@example.com", ["to1@example.org"])
    ]


def test_smtp_script_mode_reply_delay_range_and_hang_data_from(tmp_path):
    port, log, hang = free_port(), tmp_path / "sink.log", tmp_path / "hang.txt"
    hang.write_text("stuck@example.com\n\nother@example.com\n")
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.smtp", "--port", str(port), "--log", str(log)]
        + ["--reply-delay-range", "0.05,0.1", "--hang-data-from", str(hang)],
        cwd=ROOT,
    )
    try:
        wait_for_port(port, process=process)
        before = time.time()
        _send("127.0.0.1", port, 3)
        with (
            smtplib.SMTP("127.0.0.1", port, timeout=1) as conn,
            pytest.raises((TimeoutError, smtplib.SMTPServerDisconnected)),
        ):
            conn.sendmail("other@example.com", ["b@example.org"], b"Subject: x\r\n\r\nbody\r\n")
        lines = [line.split() for line in log.read_text().splitlines()]
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert [line[1:] for line in lines] == [["from@example.com", "to3@example.org"]]
    # Banner, EHLO, MAIL, RCPT, DATA's 354, end of DATA: each at least 50 ms.
    assert float(lines[0][0]) >= before + 6 * 0.05 - 6 * EARLY


@pytest.mark.parametrize("bad", ["0.5,0.1", "0.1", "a,b"])
def test_smtp_script_mode_refuses_a_malformed_reply_delay_range(bad):
    result = subprocess.run(
        [sys.executable, "-m", "tests.support.smtp", "--port", str(free_port())]
        + ["--reply-delay-range", bad],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert "--reply-delay-range: MIN,MAX" in result.stderr


def test_receiver_delay(receiver):
    receiver.delay = 0.3
    started = time.monotonic()
    assert requests.post(receiver.url, data=b"{}", timeout=10).status_code == 200
    assert time.monotonic() - started >= 0.3 - EARLY


def test_receiver_delay_does_not_serialise_concurrent_connections(receiver):
    receiver.delay = 0.5
    clients = 200  # one after another: 100 s
    statuses = []

    def run():
        try:
            statuses.append(requests.post(receiver.url, data=b"{}", timeout=20).status_code)
        except requests.RequestException as exc:
            statuses.append(exc)

    threads = [threading.Thread(target=run) for _ in range(clients)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    assert statuses == [200] * clients
    assert elapsed < 10, elapsed


def test_receiver_hang_reads_the_request_and_never_answers(receiver):
    receiver.hang = True
    with pytest.raises(requests.ReadTimeout):
        requests.post(receiver.url, data=b'{"id": "e1"}', timeout=0.5)
    assert [r.body for r in receiver.wait_for(1)] == [b'{"id": "e1"}']


def test_receiver_script_mode_serves_several_ports_and_logs(tmp_path):
    ports, log = [free_port(), free_port()], tmp_path / "receiver.log"
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.receiver", "--delay", "0.2", "--log", str(log)]
        + [arg for port in ports for arg in ("--port", str(port))],
        cwd=ROOT,
    )
    try:
        for port in ports:
            wait_for_port(port, process=process)
        for n, port in enumerate(ports):
            response = requests.post(f"http://127.0.0.1:{port}/e{n}", json={"id": f"id{n}"})
            assert response.status_code == 200
        # A request's line is written once its answer is out (it records when): the
        # client may read the answer before the line is there.
        deadline = time.monotonic() + 10
        while len(log.read_text().splitlines()) < len(ports):
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.02)
        lines = [line.split() for line in log.read_text().splitlines()]
    finally:
        process.terminate()
        process.wait(timeout=10)
    assert [line[2:] for line in lines] == [
        [str(ports[0]), "/e0", "id0"],
        [str(ports[1]), "/e1", "id1"],
    ]
    for line in lines:
        assert float(line[1]) - float(line[0]) >= 0.2 - EARLY
