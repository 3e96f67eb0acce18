"""Reply intake: one poll of a mailbox holding 1,000 new replies, against parsing the
same messages with the standard library's email parser alone, in the same run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
    REDIS_URL=redis://127.0.0.1:6379/3 \\
      .venv/bin/python bench/bench_intake.py [messages]

The world: a real Dovecot (tests/intake/conftest.py's, started here) whose INBOX holds
`messages` replies (default 1,000) to as many enrollments of one campaign: the
real-world corpus of tests/conversations/mail (Gmail, Outlook, Apple Mail, Thunderbird,
charsets, HTML-only, broken MIME), each threaded to its own enrollment's email by an
`In-Reply-To`, and one message in twenty carrying a 600 KB attachment (so that reading
every body at once would hold tens of megabytes).

Service: `mailbox_poll` (outreach.intake.mailbox), what the beat task runs: headers,
matching, whole messages fetched in groups of at most IMAP_FETCH_MAX_BYTES, the parser,
the labels, one Reply row each and its effect (enrollment.replied, ...). Messages stored
per second.

Baseline: the same raw messages, already in memory, parsed with
`email.message_from_bytes(raw, policy=email.policy.default)` and the text of
`get_body(("plain", "html"))` read: the least any intake must do. Messages per second.

Memory: a second poll of a second mailbox of the same messages under tracemalloc: the
peak of Python allocations during the poll (tracemalloc slows it, so it is timed apart).
"""

import base64
import email
import email.policy
import imaplib
import os
import sys
import time
import tracemalloc
import uuid
from datetime import timedelta

os.environ["OUTBOUND_ALLOW_PRIVATE_NETWORKS"] = "true"  # Dovecot is on loopback

from _setup import ROOT, account_create, account_drop, prepare, sent_create  # noqa: E402

prepare()

from django.conf import settings  # noqa: E402
from django.utils import timezone  # noqa: E402

from outreach.intake.mailbox import mailbox_poll  # noqa: E402
from outreach.models.campaigns import Campaign  # noqa: E402
from outreach.models.contacts import Contact  # noqa: E402
from outreach.models.conversations import Reply  # noqa: E402
from outreach.models.mailboxes import SmtpCredential  # noqa: E402
from outreach.models.sending import Message  # noqa: E402
from tests.intake.conftest import Dovecot  # noqa: E402

MESSAGES = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
CORPUS = sorted((ROOT / "tests" / "conversations" / "mail").glob("*.eml"))
ATTACHMENT = b"A" * 600_000


def corpus_message(index: int, in_reply_to: str, sender: str) -> bytes:
    """A corpus file threaded to our email; every 20th with a large attachment."""
    raw = CORPUS[index % len(CORPUS)].read_bytes()
    head = f"In-Reply-To: <{in_reply_to}>\r\n".encode()
    if index % 20 == 0:
        boundary = uuid.uuid4().hex
        return (
            head
            + (
                f"From: <{sender}>\r\nSubject: Re: Hello\r\nMessage-ID: <big{index}@client.example>\r\n"
                f'MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary="{boundary}"\r\n\r\n'
                f"--{boundary}\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n"
                f"The deck you asked for.\r\n"
                f"--{boundary}\r\nContent-Type: application/pdf; name=deck.pdf\r\n"
                f"Content-Disposition: attachment; filename=deck.pdf\r\n"
                f"Content-Transfer-Encoding: base64\r\n\r\n"
            ).encode()
            + base64.encodebytes(ATTACHMENT).replace(b"\n", b"\r\n")
            + (f"--{boundary}--\r\n").encode()
        )
    return head + raw


def world(account, dovecot: Dovecot, label: str):
    """A campaign of MESSAGES enrollments, each with a sent message, from a mailbox on
    `dovecot` whose INBOX holds a reply to each: (credential, raw messages)."""
    username, password = dovecot.user_take()
    credential = SmtpCredential.objects.create(
        account=account,
        from_email=f"{label}@sender.example",
        smtp_host="127.0.0.1",
        smtp_port=25,
        imap_host="127.0.0.1",
        imap_port=dovecot.port,
        imap_security="none",
        imap_username=username,
        imap_password=password,
    )
    campaign = Campaign.objects.create(
        account=account, name=f"bench intake {label}", status="active"
    )
    campaign.credentials.add(credential)
    contacts = Contact.objects.bulk_create(
        [
            Contact(
                account=account,
                email=f"{label}{i}@client.example",
                email_lower=f"{label}{i}@client.example",
            )
            for i in range(MESSAGES)
        ]
    )
    _, messages = sent_create(
        campaign, contacts, credential=credential, at=timezone.now() - timedelta(hours=1)
    )
    raws = [
        corpus_message(i, message.message_id, contacts[i].email)
        for i, message in enumerate(messages)
    ]
    client = imaplib.IMAP4("127.0.0.1", dovecot.port, timeout=60)
    client.login(username, password)
    for raw in raws:
        kind, data = client.append("INBOX", None, None, raw)
        assert kind == "OK", data
    client.logout()
    # The first poll starts from the day before the mailbox's first send.
    return credential, raws


def baseline(raws: list[bytes]) -> float:
    start = time.perf_counter()
    for raw in raws:
        message = email.message_from_bytes(raw, policy=email.policy.default)
        try:
            body = message.get_body(("plain", "html"))
            if body is not None:
                body.get_content()
        except (LookupError, ValueError, AttributeError):
            pass  # what the standard library cannot decode, a real intake must still keep
    return len(raws) / (time.perf_counter() - start)


def main() -> None:
    if not CORPUS:
        sys.exit("tests/conversations/mail/*.eml is empty: the corpus is the benchmark's input")
    settings.IMAP_MAX_MESSAGES_PER_POLL = MESSAGES
    account = account_create("intake")
    dovecot = Dovecot()
    try:
        credential, raws = world(account, dovecot, "a")
        size = sum(len(raw) for raw in raws)
        print(f"{MESSAGES} messages, {size / 1e6:.1f} MB, corpus of {len(CORPUS)} files")

        base = baseline(raws)

        start = time.perf_counter()
        result = mailbox_poll(credential=credential)
        elapsed = time.perf_counter() - start
        assert result.error == "", result.error
        stored = Reply.objects.filter(credential=credential).count()
        kinds = {kind: result.count(kind) for kind in ("replied", "auto_reply", "kept", "ignored")}
        service = stored / elapsed

        credential2, _ = world(account, dovecot, "b")
        tracemalloc.start()
        result2 = mailbox_poll(credential=credential2)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert result2.error == "", result2.error

        print(f"baseline (email.message_from_bytes + get_body): {base:,.0f} messages/s")
        print(
            f"service (mailbox_poll, stored):                {service:,.0f} messages/s "
            f"({stored} stored in {elapsed:.2f} s; {kinds})"
        )
        print(f"ratio: {service / base:.2f}")
        print(
            f"peak Python memory of a poll (tracemalloc): {peak / 1e6:.1f} MB "
            f"(IMAP_FETCH_MAX_BYTES {settings.IMAP_FETCH_MAX_BYTES / 1e6:.1f} MB; "
            f"the mailbox holds {size / 1e6:.1f} MB)"
        )
    finally:
        dovecot.stop()
        Reply.objects.filter(account=account).delete()
        Message.objects.filter(account=account).delete()
        account_drop(account)


if __name__ == "__main__":
    main()
