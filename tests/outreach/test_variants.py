"""A/B variants of a step: the API (create, read, validation), the draw (even, random,
kept on retries), what the SMTP server receives (threads follow the subject actually
sent), and the per-variant stats of GET /campaigns/:id/stats."""

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from outreach import enrollments
from outreach.campaigns.variants import variants_assign
from outreach.intake.services import enrollment_mark_opened, enrollment_mark_replied
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment, Message, SendClaim
from outreach.sending.bounces import enrollment_mark_bounced
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error, assert_fields

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday

pytestmark = pytest.mark.django_db


def _variant(letter: str, **kwargs) -> dict:
    return {"subject": f"Subject {letter}", "body_text": f"Body {letter}", **kwargs}


# --- the API ---------------------------------------------------------------------------------


def test_a_step_carries_its_variants(api_client):
    response = api_client.post(
        "/campaigns",
        {
            "name": "AB",
            "steps": [
                {"subject": "Subject A", "body_text": "Body A", "variants": [_variant("B")]},
                {
                    "body_text": "Follow up A",
                    "variants": [
                        {"body_text": "Follow up B", "body_html": "<p>B</p>"},
                        _variant("C", body_html=None),
                    ],
                },
            ],
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    steps = response.json()["steps"]
    assert steps[0]["variants"] == [
        {"variant": "B", "subject": "Subject B", "body_text": "Body B", "body_html": None}
    ]
    assert steps[1]["variants"] == [
        {"variant": "B", "subject": "", "body_text": "Follow up B", "body_html": "<p>B</p>"},
        {"variant": "C", "subject": "Subject C", "body_text": "Body C", "body_html": None},
    ]
    campaign_id = response.json()["id"]
    assert api_client.get(f"/campaigns/{campaign_id}").json()["steps"] == steps

    # Steps are replaced whole: a step sent without variants has none.
    response = api_client.patch(
        f"/campaigns/{campaign_id}",
        {"steps": [{"subject": "Only A", "body_text": "Body A"}]},
        format="json",
    )
    assert response.json()["steps"][0]["variants"] == []
    assert CampaignStep.objects.get(campaign_id=campaign_id).variants == []


@pytest.mark.parametrize(
    ("variants", "field", "message"),
    [
        (
            [_variant("B"), _variant("C", body_text="Hi {{firstname}}")],
            "steps.0.variants.1.body_text",
            "Unknown variable {{firstname}}",
        ),
        ([_variant("B", subject="Hi {{nope}}")], "steps.0.variants.0.subject", "{{nope}}"),
        ([{"subject": "B"}], "steps.0.variants.0.body_text", "required"),
        ([_variant("B", subject="  ")], "steps.0.variants.0.subject", "needs a subject"),
        ([_variant(x) for x in "BCDEF"], "steps.0.variants", "no more than 4"),
        ("B", "steps.0.variants", "list"),
        (["B"], "steps.0.variants.0.non_field_errors", "dictionary"),
    ],
)
def test_variants_are_validated_like_the_step(api_client, variants, field, message):
    response = api_client.post(
        "/campaigns",
        {"name": "AB", "steps": [{"subject": "A", "body_text": "A", "variants": variants}]},
        format="json",
    )

    fields = assert_fields(response, field)
    assert message in fields[field][0]
    assert not Campaign.objects.exists()


def test_four_variants_is_the_most(api_client):
    response = api_client.post(
        "/campaigns",
        {
            "name": "AB",
            "steps": [
                {
                    "subject": "A",
                    "body_text": "A",
                    "variants": [_variant(x) for x in "BCDE"],
                }
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.content
    assert [v["variant"] for v in response.json()["steps"][0]["variants"]] == list("BCDE")


def test_a_later_steps_variant_may_reply_in_the_thread(api_client):
    response = api_client.post(
        "/campaigns",
        {
            "name": "AB",
            "steps": [
                {"subject": "A", "body_text": "A"},
                {"body_text": "Up", "variants": [{"subject": "", "body_text": "Up B"}]},
            ],
        },
        format="json",
    )
    assert response.status_code == 201, response.content


# --- the draw --------------------------------------------------------------------------------


def test_the_draw_is_even_over_a_thousand_enrollments():
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    step = campaign.steps.get()
    step.variants = [_variant("B")]
    step.save()
    contacts = ContactFactory.create_batch(1000, account=campaign.account)
    Enrollment.objects.bulk_create(Enrollment(campaign=campaign, contact=c) for c in contacts)
    enrollments = list(campaign.enrollments.all())

    chosen = variants_assign([(e, step) for e in enrollments])

    counts = Counter(chosen.values())
    # Binomial(1000, 1/2): sd ~ 15.8, so +-80 is over 5 sd (fails about once in 2 million).
    assert set(counts) == {"A", "B"}
    assert all(420 <= count <= 580 for count in counts.values()), counts
    # Stored on the enrollments, as drawn.
    stored = Counter(v["1"] for v in campaign.enrollments.values_list("variants", flat=True))
    assert stored == counts
    # A second pass (a retry) draws nothing new.
    again = variants_assign([(e, step) for e in campaign.enrollments.all()])
    assert again == chosen


def test_a_step_without_variants_draws_nothing():
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    enrollment = EnrollmentFactory(campaign=campaign)

    assert variants_assign([(enrollment, campaign.steps.get())]) == {enrollment.pk: "A"}
    enrollment.refresh_from_db()
    assert enrollment.variants == {}


def test_a_letter_the_step_no_longer_has_is_drawn_again():
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    step = campaign.steps.get()
    step.variants = [_variant("B")]
    step.save()
    enrollment = EnrollmentFactory(campaign=campaign, variants={"1": "D", "2": "C"})

    chosen = variants_assign([(enrollment, step)])

    assert chosen[enrollment.pk] in ("A", "B")
    enrollment.refresh_from_db()
    assert enrollment.variants == {"1": chosen[enrollment.pk], "2": "C"}


# --- on the wire -----------------------------------------------------------------------------


@pytest.fixture
def sink(smtp_sink):
    return smtp_sink()


def _campaign(sink, steps: list[dict]) -> Campaign:
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE, with_steps=0)
    for position, step in enumerate(steps, start=1):
        CampaignStep.objects.create(campaign=campaign, position=position, **step)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username = "none", ""
    credential.save()
    return campaign


def _enroll(campaign, count: int) -> list[Enrollment]:
    return [
        EnrollmentFactory(
            campaign=campaign,
            contact=ContactFactory(account=campaign.account, email=f"c{i}@example.org"),
            status=Enrollment.Status.SCHEDULED,
            next_send_at=NOW,
        )
        for i in range(count)
    ]


def _run(now) -> None:
    for batch in schedule_due(now=now):
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: now)


def test_a_retry_sends_the_variant_first_drawn(sink, settings):
    settings.SENDING_RETRY_SCHEDULE = [60]
    campaign = _campaign(
        sink,
        [
            {
                "subject": "Subject A",
                "body_text": "Body A",
                "variants": [_variant(x) for x in "BCDE"],
            }
        ],
    )
    enrollments = _enroll(campaign, 10)
    # Postgrey's greylisting: a plain temporary refusal. (A 4.7.x one would be a strike of
    # the circuit breaker, and the third would hold the rest without an attempt.)
    greylisted = "450 4.2.0 Recipient address rejected: Greylisted, try again later"
    for enrollment in enrollments:
        sink.reject_rcpt(enrollment.contact.email, greylisted, times=1)

    _run(NOW)
    assert sink.messages == []
    drawn = {}
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        assert enrollment.send_attempts == 1
        drawn[enrollment.contact.email] = enrollment.variants["1"]

    _run(NOW + timedelta(seconds=60))

    # Ten draws among five letters would all repeat by chance once in ~10 million.
    received = {m.rcpt_tos[0]: m.message["Subject"] for m in sink.messages}
    assert received == {email: f"Subject {letter}" for email, letter in drawn.items()}
    for message in Message.objects.select_related("enrollment__contact"):
        assert message.variant == drawn[message.enrollment.contact.email]
        assert message.subject == f"Subject {message.variant}"


def test_a_follow_up_threads_on_the_subject_its_enrollment_was_sent(sink):
    campaign = _campaign(
        sink,
        [
            {"subject": "Hello A", "body_text": "A", "variants": [_variant("B", subject="Hi B")]},
            {
                "subject": "",
                "body_text": "Up A",
                "delay_minutes": 60,
                # Variant B of the follow-up starts a thread of its own.
                "variants": [{"subject": "Fresh start", "body_text": "Up B", "body_html": ""}],
            },
        ],
    )
    enrollments = _enroll(campaign, 12)

    _run(NOW)
    _run(NOW + timedelta(hours=1))

    assert len(sink.messages) == 24
    by_recipient: dict[str, list] = {}
    for received in sink.messages:
        by_recipient.setdefault(received.rcpt_tos[0], []).append(received.message)
    for enrollment in enrollments:
        enrollment.refresh_from_db()
        first, second = by_recipient[enrollment.contact.email]
        step1, step2 = enrollment.variants["1"], enrollment.variants["2"]
        assert first["Subject"] == {"A": "Hello A", "B": "Hi B"}[step1]
        if step2 == "A":
            assert second["Subject"] == f"Re: {first['Subject']}"
            assert second["In-Reply-To"] == first["Message-ID"]
        else:
            assert second["Subject"] == "Fresh start"
            assert second["In-Reply-To"] is None
        assert second.get_content().strip() == f"Up {step2}"
        sent = {m.step: m.variant for m in enrollment.messages.all()}
        assert sent == {1: step1, 2: step2}


# --- GET /campaigns/:id/stats ----------------------------------------------------------------


def _message(enrollment, step: int, variant: str, at: datetime) -> Message:
    """A step sent as the sender leaves it: the message (counted for its variant) and the
    enrollment moved to that step."""
    message = Message.objects.create(
        account=enrollment.campaign.account,
        enrollment=enrollment,
        step=step,
        variant=variant,
        message_id=f"{enrollment.pk}-{step}@sender.example",
        to_email=enrollment.contact.email,
        subject="s",
        sent_at=at,
    )
    enrollments.variant_count(enrollment.campaign_id, step, variant, sent=1)
    enrollment.variants = {**(enrollment.variants or {}), str(step): variant}
    enrollment.current_step = step
    enrollment.save(update_fields=["variants", "current_step"])
    return message


def test_stats_per_step_and_variant(
    api_client, account, django_assert_max_num_queries, auth_queries
):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE, with_steps=2)
    CampaignStep.objects.filter(campaign=campaign, position=1).update(variants=[_variant("B")])
    CampaignStep.objects.filter(campaign=campaign, position=2).update(
        variants=[_variant("B"), _variant("C")]
    )
    day = timedelta(days=1)
    # Opened after step 1 (B), replied after step 2 (A): each counted for its step.
    e1 = EnrollmentFactory(campaign=campaign, status="sent")
    _message(e1, 1, "B", NOW)
    enrollment_mark_opened(enrollment_id=e1.pk, at=NOW + timedelta(hours=1))
    _message(e1, 2, "A", NOW + day)
    enrollment_mark_replied(enrollment_id=e1.pk, at=NOW + day * 2)
    # Bounced after step 1 (A).
    e2 = EnrollmentFactory(campaign=campaign, status="sent")
    _message(e2, 1, "A", NOW)
    enrollment_mark_bounced(enrollment=e2, reason="550 gone", at=NOW + timedelta(hours=1))
    # Sent step 1 (B) only; opened later.
    e3 = EnrollmentFactory(campaign=campaign, status="sent")
    _message(e3, 1, "B", NOW)
    enrollment_mark_opened(enrollment_id=e3.pk, at=NOW + day)
    # A letter the step no longer has (steps edited since).
    e4 = EnrollmentFactory(campaign=campaign, status="sent")
    _message(e4, 1, "D", NOW)
    EnrollmentFactory(campaign=campaign)  # not sent yet

    with django_assert_max_num_queries(auth_queries + 4):
        response = api_client.get(f"/campaigns/{campaign.pk}/stats")

    assert response.status_code == 200
    body = response.json()

    def row(variant, sent=0, opened=0, replied=0, bounced=0):
        return {
            "variant": variant,
            "sent": sent,
            "opened": opened,
            "clicked": 0,
            "replied": replied,
            "bounced": bounced,
        }

    assert body == {
        "campaign_id": str(campaign.pk),
        "enrolled": 5,
        "sent": 0,  # enrollments with a step recorded (sent_at): not set by this test
        "opened": 2,
        "clicked": 0,
        "replied": 1,
        "bounced": 1,
        "unsubscribed": 0,
        "stopped": 0,
        "steps": [
            {
                "position": 1,
                "key": "step_1",
                "variants": [
                    row("A", sent=1, bounced=1),
                    row("B", sent=2, opened=2),
                    row("D", sent=1),
                ],
            },
            {
                "position": 2,
                "key": "step_2",
                "variants": [row("A", sent=1, replied=1), row("B"), row("C")],
            },
        ],
        "branches": [],
    }
    # What was kept on write is what a recount finds.
    assert enrollments.stats_check(campaign_id=campaign.pk) == {}


def test_an_enrollment_shows_its_variants(api_client, account):
    campaign = CampaignFactory(account=account, status=Campaign.Status.ACTIVE)
    enrollment = EnrollmentFactory(campaign=campaign, variants={"1": "B"})

    [listed] = api_client.get(f"/campaigns/{campaign.pk}/enrollments").json()

    assert listed["id"] == str(enrollment.pk)
    assert listed["variants"] == {"1": "B"}


def test_stats_of_another_accounts_campaign_are_not_found(api_client):
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE)
    assert_error(api_client.get(f"/campaigns/{campaign.pk}/stats"), 404, "campaign_not_found")


def test_a_send_whose_worker_was_lost_records_the_variant_drawn(sink, settings):
    settings.SENDING_LEASE_SECONDS = 60
    campaign = _campaign(
        sink, [{"subject": "Subject A", "body_text": "A", "variants": [_variant("B")]}]
    )
    [enrollment] = _enroll(campaign, 1)
    schedule_due(now=NOW)
    # The sender drew the variant and marked the claim started, then died.
    Enrollment.objects.filter(pk=enrollment.pk).update(variants={"1": "B"})
    SendClaim.objects.filter(enrollment=enrollment).update(
        sending_at=NOW, message_id="m1@example.com", subject="Subject B", to_email="x@example.org"
    )

    schedule_due(now=NOW + timedelta(seconds=60))

    message = Message.objects.get(enrollment=enrollment)
    assert (message.subject, message.variant, message.reply_seen) == ("Subject B", "B", False)
