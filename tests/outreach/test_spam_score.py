"""Every kind of message the sending engine builds, for a message of ordinary length,
scores at most 1.0 with SpamAssassin's local rules (tests/support/spamassassin.py): each
message is sent through the engine to a real SMTP server (aiosmtpd) and the bytes it
received are scored. A failure prints the rules hit.

docs/deliverability.md ("What open tracking costs") gives what the open pixel costs at
each length; bench/spam_scores.py measures it."""

from datetime import UTC, datetime, timedelta

import pytest

from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.support.spamassassin import spamassassin_path, spamassassin_score

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday
MAX_SCORE = 1.0

# An ordinary first email: about 110 words, a greeting, three short paragraphs, a link.
PARAGRAPHS = [
    "I noticed {{company}} has been hiring engineers in Berlin and Lisbon this spring, "
    "and I wondered how the team is finding the process so far.",
    "We help companies of your size run their technical interviews: our reviewers take "
    "the first round, and your engineers only meet the candidates worth their time. Last "
    "year a logistics company of about two hundred people cut its time to hire from "
    "seven weeks to three.",
    "Here is how they did it: https://www.hireloop.example/stories/logistics "
    "If it sounds useful, would a twenty-minute call next Tuesday or Wednesday work?",
]
TEXT = "Hi {{first_name|there}},\n\n" + "\n\n".join(PARAGRAPHS) + "\n\nBest,\nSam\n"
HTML = (
    "<html><body>"
    "<p>Hi {{first_name|there}},</p>"
    f"<p>{PARAGRAPHS[0]}</p><p>{PARAGRAPHS[1]}</p>"
    '<p>Here is <a href="https://www.hireloop.example/stories/logistics">how they did it</a>. '
    "If it sounds useful, would a twenty-minute call next Tuesday or Wednesday work?</p>"
    "<p>Best,<br>Sam</p>"
    "</body></html>"
)
FOLLOW_UP = (
    "Hi {{first_name|there}}, a short follow-up on my note from last week about your "
    "engineering interviews. Would a quick call help, or is someone else the right person "
    "to ask? Either way, thanks for reading.\n\nSam\n"
)


@pytest.fixture
def sink(smtp_sink, db):
    spamassassin_path()  # skipped (or failed in CI) before anything is built
    return smtp_sink()


def _received(sink, *, steps: list[dict], **campaign_settings) -> list[bytes]:
    """The bytes of each step, sent to one contact through the engine."""
    campaign = CampaignFactory(
        with_steps=0, status=Campaign.Status.ACTIVE, name="Hiring", **campaign_settings
    )
    for position, step in enumerate(steps, start=1):
        CampaignStep.objects.create(campaign=campaign, position=position, **step)
    credential = campaign.credentials.get()
    credential.from_email, credential.from_name = "sam@hireloop.example", "Sam Carter"
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username, credential.smtp_password = "none", "", ""
    credential.save()
    contact = ContactFactory(
        account=campaign.account, email="ada@lovelace.example", first_name="Ada", company="Acme"
    )
    EnrollmentFactory(
        campaign=campaign,
        contact=contact,
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
        dispatched_at=NOW,
    )
    at = NOW
    for step in steps:
        at += timedelta(minutes=step.get("delay_minutes", 0))
        for claimed in schedule_due(now=at):
            batch_send(
                batch_id=claimed.batch_id,
                credential_id=claimed.credential_id,
                clock=lambda at=at: at,
            )
    assert len(sink.messages) == len(steps)
    return [received.data for received in sink.messages]


FIRST = {"subject": "Interviews at {{company}}", "body_text": TEXT, "delay_minutes": 0}
KINDS = {
    "plain text": ({"steps": [FIRST], "track_opens": False}, 0),
    "plain text, opens tracked (no HTML: no pixel)": ({"steps": [FIRST]}, 0),
    "HTML with the open pixel": ({"steps": [{**FIRST, "body_html": HTML}]}, 0),
    "HTML without tracking": ({"steps": [{**FIRST, "body_html": HTML}], "track_opens": False}, 0),
    "HTML and text with tracked links": (
        {"steps": [{**FIRST, "body_html": HTML}], "track_clicks": True},
        0,
    ),
    "with the opt-out footer": (
        {"steps": [{**FIRST, "body_html": HTML}], "unsubscribe_footer": True, "track_clicks": True},
        0,
    ),
    "a follow-up in the thread": (
        {
            "steps": [
                {**FIRST, "body_html": HTML},
                {"subject": "", "body_text": FOLLOW_UP, "delay_minutes": 60 * 24 * 3},
            ],
            "track_clicks": True,
        },
        1,
    ),
}


@pytest.mark.parametrize("kind", list(KINDS))
def test_every_kind_of_message_scores_at_most_one_point(kind, sink, tmp_path):
    settings, which = KINDS[kind]
    data = _received(sink, **settings)[which]
    result = spamassassin_score(data, home=tmp_path)
    assert result.score <= MAX_SCORE, f"{kind}: {result.explain()}\n\n{data.decode()[:3000]}"


def test_the_follow_up_is_a_reply_in_the_thread(sink):
    first, follow_up = _received(
        sink,
        steps=[FIRST, {"subject": "", "body_text": FOLLOW_UP, "delay_minutes": 60 * 24 * 3}],
    )
    assert b"\r\nSubject: Re: Interviews at Acme\r\n" in follow_up
    assert b"\r\nIn-Reply-To: <" in follow_up


def test_the_scorer_sees_what_spam_filters_punish(tmp_path):
    """The check can fail: an image-only HTML message of a few words scores above 1.0,
    with its rules named."""
    spamassassin_path()
    message = (
        b"From: Sam <sam@hireloop.example>\r\nTo: ada@lovelace.example\r\n"
        b"Subject: FREE!!! Act now\r\nMessage-ID: <1@hireloop.example>\r\n"
        b"Date: Mon, 02 Mar 2026 10:00:00 +0000\r\nMIME-Version: 1.0\r\n"
        b'Content-Type: text/html; charset="utf-8"\r\n\r\n'
        b'<html><body><a href="http://1.2.3.4/x"><img src="http://1.2.3.4/big.jpg" '
        b'width="600" height="800"></a></body></html>\r\n'
    )
    result = spamassassin_score(message, home=tmp_path)
    assert result.score > MAX_SCORE
    assert "MIME_HTML_ONLY" in result.rules
    assert "MIME_HTML_ONLY" in result.explain()
