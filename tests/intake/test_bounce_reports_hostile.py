"""Hostile delivery reports: the readers of reports (outreach.intake.reports and
reports_text) take broken MIME, undecodable bytes, absurd lengths and a regex-hostile
body and answer a report or None, never an exception (a crash here
would stop the mailbox's poll: docs/intake.md)."""

from email import message_from_bytes, policy

import pytest

from outreach.bounce_types import classify
from outreach.intake.reports import delivery_report_parse, is_delivery_report
from outreach.intake.reports_text import text_report_failures

BROKEN_DSN = (
    b"From: MAILER-DAEMON@mx.example.net\r\nTo: sales@ours.example\r\n"
    b"Subject: Undelivered Mail Returned to Sender\r\nMIME-Version: 1.0\r\n"
    b'Content-Type: multipart/report; report-type=delivery-status; boundary="b1"\r\n\r\n'
    b"--b1\r\nContent-Type: text/plain; charset=x-no-such-charset\r\n\r\n\xff\xfe\x00 \xc3\x28\r\n"
    b"--b1\r\nContent-Type: message/delivery-status\r\n\r\n"
    b"Reporting-MTA: dns;\xff\xff\r\n\r\nFinal-Recipient: rfc822;\r\nAction: failed\r\n"
    b"Status: 5.\xff.1\r\nDiagnostic-Code: smtp; " + b"A" * 20000 + b"\r\n"
    # No closing boundary: the message ends inside the status part.
)
HOSTILE = [
    BROKEN_DSN,
    b"From: mailer-daemon@x\r\nSubject: failure notice\r\n\r\n" + b"@" * 50000,
    b"From: mailer-daemon@x\r\nSubject: failure notice\r\n\r\n"
    + b"<a@b.c>:\r\n" * 5000
    + b"I wasn't able to deliver your message\r\n",
    b"Content-Type: multipart/report; boundary=\r\n\r\n--\r\n--\r\n",
    b"\x00\x01\x02 not a message at all \xff",
]


@pytest.mark.parametrize("raw", HOSTILE, ids=range(len(HOSTILE)))
def test_a_hostile_report_is_read_or_refused_never_a_crash(raw):
    message = message_from_bytes(raw, policy=policy.default)
    if is_delivery_report(message):
        report = delivery_report_parse(message)
        for failure in report.failures if report is not None else []:
            klass = classify(code=None, text=failure.reason)
            assert klass.type in ("hard", "soft", "block")


def test_the_text_reader_takes_a_body_built_to_slow_its_patterns():
    body = ("x" * 40 + "@" + "y." * 2000 + "\n") * 20 + "permanent fatal errors\n"
    failures = text_report_failures(body, exclude={"sales@ours.example"})
    assert all("@" in failure.recipient for failure in failures)
