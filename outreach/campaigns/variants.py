"""A/B variants of a step's content.

A step's own subject and bodies are variant "A"; CampaignStep.variants holds up to
MAX_EXTRA_VARIANTS more, "B", "C", ... in order. Each enrollment is given one variant
per step, drawn uniformly at random at the step's first send attempt and stored on the
enrollment (Enrollment.variants, {"<position>": "<letter>"}) before the message is
built, so a retry sends the same variant. The message records the variant it carried
(Message.variant); per-variant stats count those (outreach.campaigns.selectors.campaign_step_stats).
"""

import secrets
from dataclasses import dataclass
from uuid import UUID

from outreach.models.campaigns import CampaignStep
from outreach.models.sending import Enrollment

MAX_EXTRA_VARIANTS = 4
LETTERS = "ABCDE"
DEFAULT = "A"


@dataclass(frozen=True)
class Content:
    subject: str
    body_text: str
    body_html: str


def step_letters(step: CampaignStep) -> str:
    """The variant letters of a step: "A", then one per extra variant."""
    return LETTERS[: 1 + len(step.variants or [])]


def step_content(step: CampaignStep, letter: str) -> Content:
    """The subject and bodies of one variant of the step (an unknown letter: "A")."""
    index = LETTERS.find(letter)
    extra = (step.variants or []) if index > 0 else []
    if 1 <= index <= len(extra):
        variant = extra[index - 1]
        return Content(
            subject=variant.get("subject") or "",
            body_text=variant.get("body_text") or "",
            body_html=variant.get("body_html") or "",
        )
    return Content(subject=step.subject, body_text=step.body_text, body_html=step.body_html)


def stored_letter(enrollment: Enrollment, position: int) -> str:
    """The variant recorded for a step of the enrollment ("A" when none was drawn)."""
    letter: str = (enrollment.variants or {}).get(str(position), DEFAULT)
    return letter


def variants_assign(claims: list[tuple[Enrollment, CampaignStep | None]]) -> dict[UUID, str]:
    """The variant each (enrollment, step) sends, by enrollment id. A step with variants
    gets one drawn for an enrollment that has none for it yet (or whose letter the step
    no longer has, after an edit); the draws are stored in one UPDATE, before anything
    is sent, so a retry reads the same letter back. The caller holds the enrollments'
    send claims, so no one else draws for them meanwhile."""
    chosen: dict[UUID, str] = {}
    drawn = []
    for enrollment, step in claims:
        if step is None:
            chosen[enrollment.pk] = DEFAULT
            continue
        letters = step_letters(step)
        letter = (enrollment.variants or {}).get(str(step.position))
        if letter not in tuple(letters):
            if len(letters) == 1:
                letter = DEFAULT
            else:
                letter = secrets.choice(letters)
                enrollment.variants = {**(enrollment.variants or {}), str(step.position): letter}
                drawn.append(enrollment)
        chosen[enrollment.pk] = letter
    if drawn:
        Enrollment.objects.bulk_update(drawn, ["variants"])
    return chosen
