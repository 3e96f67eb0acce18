"""The SDK's README examples, run as written against the live service: every `python`
block of clients/python/README.md, in a fresh interpreter, with OUTREACH_API_KEY and
OUTREACH_BASE_URL set as the README says. Only what cannot be the same here changes:
the SMTP sink's port (2525 in the README) and the webhook receiver's URL. The service asks
the test's DNS server (the sender domain check), which knows nothing of example.com."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.utils import timezone

from outreach.models.blocklist import BlocklistEntry
from outreach.models.conversations import Reply
from outreach.models.sending import Enrollment

pytestmark = [pytest.mark.e2e]

README = Path(__file__).resolve().parents[2] / "clients" / "python" / "README.md"


def _blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.DOTALL)


def _run(code: str, env: dict) -> str:
    result = subprocess.run(
        [sys.executable, "-c", code],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_every_python_block_of_the_readme_runs_as_written(
    service_server, sdk_key, smtp_sink, receiver, dns_server
):
    url = service_server(DNS_RESOLVERS=dns_server.address, DNS_TIMEOUT_SECONDS="0.5")
    sink = smtp_sink()
    env = {**os.environ, "OUTREACH_API_KEY": sdk_key, "OUTREACH_BASE_URL": url}
    blocks = _blocks()
    assert len(blocks) == 7

    def run(block: str) -> str:
        block = block.replace("2525", str(sink.port))
        return _run(block.replace("https://hooks.example.com/in", receiver.url), env)

    first = run(blocks[0])
    lines = first.splitlines()
    assert lines[0] == "ada@example.org scheduled"
    assert lines[1].startswith("you@example.com ")
    enrollment = Enrollment.objects.get()
    assert enrollment.contact.email == "ada@example.org"
    # Ada answers, and the intake keeps her reply, labelled interested.
    Reply.objects.create(
        account=enrollment.campaign.account,
        enrollment=enrollment,
        campaign=enrollment.campaign,
        contact=enrollment.contact,
        credential=enrollment.campaign.credentials.get(),  # the mailbox on the sink
        message_id="ada-1@example.org",
        from_email="ada@example.org",
        subject="Re: Hello",
        received_at=timezone.now(),
        text="Sounds good.",
        new_text="Sounds good.",
        label="interested",
        label_source="manual",
    )
    signup, conversation, _verify, tools, deliverability, sequences = (
        run(block) for block in blocks[1:]
    )

    assert conversation.splitlines()[0] == "ada@example.org Re: Hello Sounds good."
    assert conversation.splitlines()[1].startswith("reply ")
    assert conversation.splitlines()[-1] in ("queued", "sent")
    assert Reply.objects.get().read is True
    [answer] = sink.wait_for(1)
    assert answer.message["Subject"] == "Re: Hello"

    assert signup.startswith("Signup(account_id='")
    assert "api_key=ApiKey(" in signup and "plaintext" not in signup
    assert "ak_live_" in signup  # the prefix, which is public

    assert tools.splitlines()[0].startswith("enrollment.sent ['bounce_reason', 'campaign_id'")
    assert "200 None " in tools
    assert tools.splitlines()[-1] == "0 False"
    assert len(receiver.requests) == 1

    assert deliverability.splitlines() == [
        "2 0 []",
        "competitor.example domain asked us",
        "value,kind,reason,created_at",
        "SendingDefaults(max_per_recipient_domain_per_day=20)",
        "example.com error ['spf_missing', 'dkim_not_found', 'dmarc_missing']",
        "True 0",
    ]
    assert {e.value for e in BlocklistEntry.objects.all()} == {
        "lin@example.net",
        "competitor.example",
    }

    assert sequences.splitlines() == [
        'Start: send intro ("Quick question") at dispatch; then wait at opened_intro.',
        "After intro, wait up to 3 days (opened_intro): if they open intro, send pricing "
        "(1 hour later); otherwise send bump (1 day later).",
        "pricing (a reply in the thread): then stop (the sequence ends).",
        "bump (a reply in the thread): then stop (the sequence ends).",
        "[] 0",
        "['intro', 'bump']",
    ]
