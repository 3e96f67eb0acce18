"""What open tracking costs with SpamAssassin's local rules, at each length of text.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/outreach_bench \\
      .venv/bin/python bench/spam_scores.py

Not a timing: a measurement. For HTML messages of 1 to 30 paragraphs of ordinary prose
(about 200 characters each), built by the service's own message_build (no database
rows needed: the objects are made in memory), it prints the SpamAssassin score
(`spamassassin -L -t`, local rules, no Bayes) without the pixel and with each form of
pixel below, and the rules the pixel adds. The form the service uses is
outreach.sending.message.PIXEL_HTML; docs/deliverability.md records the result.

Forms:
- img_hidden: `<img ... style="display:none">`, the form used before this measurement;
- img: a visible 1x1 `<img>`;
- table_background (the service's): a 1x1 table whose `background` is the pixel.

Needs the distribution's spamassassin (`apt-get install spamassassin`).
"""

import sys
import tempfile
import uuid
from pathlib import Path

import _setup  # noqa: F401  (Django against DATABASE_URL or the embedded mode)
from django.utils import timezone

from accounts.models import Account
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment
from outreach.sending import message
from tests.support.spamassassin import spamassassin_score

FORMS = {
    "img_hidden": '<img src="{url}" width="1" height="1" alt="" style="display:none">',
    "img": '<img src="{url}" width="1" height="1" alt="">',
    "table_background": message.PIXEL_HTML,
}
PARAGRAPH = (
    "I noticed Acme is growing its engineering team and wanted to share how we helped a "
    "similar company cut their hiring time in half. Would you be open to a short call? "
)


def build(paragraphs: int, *, track_opens: bool) -> bytes:
    account = Account(id=uuid.uuid4(), email="owner@hireloop.example")
    campaign = Campaign(id=uuid.uuid4(), account=account, track_opens=track_opens)
    text = "Hi Ada,\n\n" + "\n\n".join([PARAGRAPH] * paragraphs) + "\n\nBest,\nSam"
    html = (
        "<html><body><p>Hi Ada,</p>"
        + "".join(f"<p>{PARAGRAPH}</p>" for _ in range(paragraphs))
        + "<p>Best,<br>Sam</p></body></html>"
    )
    step = CampaignStep(
        campaign=campaign, position=1, subject="Interviews at Acme", body_text=text, body_html=html
    )
    contact = Contact(id=uuid.uuid4(), email="ada@lovelace.example", first_name="Ada")
    credential = SmtpCredential(id=uuid.uuid4(), from_email="sam@hireloop.example")
    enrollment = Enrollment(id=uuid.uuid4(), campaign=campaign, contact=contact)
    return message.message_build(
        credential=credential,
        campaign=campaign,
        step=step,
        enrollment=enrollment,
        thread=[],
        first_subject="",
        now=timezone.now(),
    ).data


def main() -> None:
    home = Path(tempfile.mkdtemp(prefix="spam-scores-"))
    print("| text (characters) | no pixel | " + " | ".join(FORMS) + " |")
    print("|---|---|" + "---|" * len(FORMS))
    for paragraphs in (1, 2, 3, 4, 6, 8, 10, 12, 14, 16, 20, 30):
        base = spamassassin_score(build(paragraphs, track_opens=False), home=home)
        cells = [f"{base.score:.1f}"]
        for form in FORMS.values():
            message.PIXEL_HTML = form
            scored = spamassassin_score(build(paragraphs, track_opens=True), home=home)
            added = sorted(
                f"{name} {points:+.1f}"
                for name, points in scored.rules.items()
                if name not in base.rules and abs(points) >= 0.05
            )
            cells.append(f"{scored.score:.1f}" + (f" ({', '.join(added)})" if added else ""))
        print(f"| {paragraphs * len(PARAGRAPH)} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    sys.exit(main())
