"""Live edits of a running sequence (API.md 17): POST /campaigns/:id/steps/preview says
which enrollments an edit moves and where, writing nothing; PATCH with the same steps
makes exactly those moves."""

from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.db.models import F
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from outreach.campaigns.windows import SendWindow, step_send_at
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, SendClaim
from tests.outreach.factories import ContactFactory, CredentialFactory, EnrollmentFactory
from tests.outreach.graph_steps import THREE_WAYS, branch, email
from tests.outreach.helpers import assert_error, assert_fields
from webhooks.models import Event

pytestmark = pytest.mark.django_db

# THREE_WAYS edited: the first branch, the pricing email and the case study removed; a
# click on the intro now decides between the bump and the end.
EDITED = [
    email("intro", subject="Quick question", next="clicked_pricing"),
    branch("clicked_pricing", on="clicked", then="bump", otherwise="end"),
    email("bump", body="Bumping this up.", delay_minutes=1440, next="end"),
]
EXPECTED_MOVES = [
    {"from_key": "opened_intro", "to_key": "bump", "enrollments": 2},
    {"from_key": "pricing", "to_key": "clicked_pricing", "enrollments": 2},
    {"from_key": "case_study", "to_key": "end", "enrollments": 2},
]
LATER = datetime(2030, 1, 1, tzinfo=UTC)
DEADLINE = datetime(2030, 1, 5, tzinfo=UTC)


def _campaign(api_client, steps=THREE_WAYS, **settings) -> Campaign:
    body = api_client.post(
        "/campaigns", {"name": "Live", "steps": steps, **settings}, format="json"
    ).json()
    campaign = Campaign.objects.get(pk=body["id"])
    Campaign.objects.filter(pk=campaign.pk).update(status=Campaign.Status.ACTIVE)
    return campaign


def _at(campaign, key, n=2, **fields):
    """`n` enrollments waiting at `key` (scheduled at the first step, sent later)."""
    first = key == "intro"
    defaults = {
        "status": "scheduled" if first else "sent",
        "current_key": key,
        "current_step": 0 if first else 1,
        "path": [] if first else ["intro"],
        "next_send_at": LATER,
    }
    if key in ("opened_intro", "clicked_pricing"):
        defaults.update(next_send_at=None, branch_deadline=DEADLINE)
    return [EnrollmentFactory(campaign=campaign, **{**defaults, **fields}) for _ in range(n)]


def _everywhere(campaign):
    keys = ("intro", "opened_intro", "pricing", "clicked_pricing", "case_study", "bump")
    at = {key: _at(campaign, key) for key in keys}
    at["pending"] = [EnrollmentFactory(campaign=campaign)]
    at["replied"] = [EnrollmentFactory(campaign=campaign, status="replied", current_key=None)]
    return at


def _state(enrollment):
    enrollment.refresh_from_db()
    return (
        enrollment.status,
        enrollment.current_key,
        enrollment.next_send_at,
        enrollment.branch_deadline,
    )


def test_preview_and_patch_agree_on_a_campaign_with_enrollments_at_every_key(api_client):
    campaign = _campaign(api_client)
    at = _everywhere(campaign)
    before = {e.pk: _state(e) for group in at.values() for e in group}
    events = Event.objects.count()

    preview = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": EDITED}, format="json"
    )
    assert preview.status_code == 200, preview.content
    assert preview.json() == {"moves": EXPECTED_MOVES}
    # The preview wrote nothing.
    assert {e.pk: _state(e) for group in at.values() for e in group} == before
    assert [s.key for s in campaign.steps.order_by("position")][1] == "opened_intro"

    now = timezone.now()
    response = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": EDITED}, format="json")
    assert response.status_code == 200, response.content
    # Every move the preview announced, and nothing else.
    for move in EXPECTED_MOVES:
        for enrollment in at[move["from_key"]]:
            status, key, _, _ = _state(enrollment)
            if move["to_key"] == "end":
                assert (status, key) == ("completed", None)
            else:
                assert key == move["to_key"]
    for group in ("intro", "clicked_pricing", "bump", "pending", "replied"):
        for enrollment in at[group]:
            assert _state(enrollment) == before[enrollment.pk], group
    # To an email step: its delay from the edit, the branch's deadline gone.
    for enrollment in at["opened_intro"]:
        status, _, next_send_at, deadline = _state(enrollment)
        assert status == "sent" and deadline is None
        assert now + timedelta(minutes=1440) <= next_send_at <= timezone.now() + timedelta(1)
    # To a branch: waiting there from the edit, nothing due.
    for enrollment in at["pricing"]:
        status, _, next_send_at, deadline = _state(enrollment)
        assert status == "sent" and next_send_at is None
        assert now + timedelta(minutes=4320) <= deadline <= timezone.now() + timedelta(3)
    # No event for an edit; the campaign still runs.
    assert Event.objects.count() == events
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.ACTIVE


def test_an_edit_that_moves_no_one_previews_no_moves(api_client):
    campaign = _campaign(api_client)
    _at(campaign, "intro")
    response = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": EDITED}, format="json"
    )
    assert response.json() == {"moves": []}


def test_removed_elements_are_walked_through_to_a_kept_one(api_client):
    """case_study and bump removed: an enrollment at the removed first branch goes to
    its else (bump, removed too), then bump's next: the end."""
    campaign = _campaign(api_client)
    at = _at(campaign, "opened_intro", n=1)
    steps = [email("intro", subject="Quick question", next="pricing"), *THREE_WAYS[2:4]]
    steps[2] = {**steps[2], "else": "end", "then": "end"}
    preview = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": steps}, format="json"
    )
    assert preview.json() == {
        "moves": [{"from_key": "opened_intro", "to_key": "end", "enrollments": 1}]
    }
    response = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": steps}, format="json")
    assert response.status_code == 200, response.content
    assert _state(at[0])[:2] == ("completed", None)
    # Its last active enrollment ended: the campaign is completed.
    campaign.refresh_from_db()
    assert campaign.status == Campaign.Status.COMPLETED


def test_a_straight_line_without_keys_edits_by_position(api_client):
    line = [email(subject="One"), email(), email()]
    campaign = _campaign(api_client, steps=line)
    second = EnrollmentFactory(campaign=campaign, status="sent", current_key="step_2")
    third = EnrollmentFactory(campaign=campaign, status="sent", current_key="step_3")
    response = api_client.patch(
        f"/campaigns/{campaign.pk}", {"steps": [email(subject="One"), email()]}, format="json"
    )
    assert response.status_code == 200, response.content
    assert _state(second)[:2] == ("sent", "step_2")
    assert _state(third)[:2] == ("completed", None)


def test_the_send_window_is_read_in_each_contacts_zone(api_client, account):
    window = {"start": "09:00", "end": "17:00", "days": [1, 2, 3, 4, 5]}
    campaign = _campaign(api_client, send_window=window, send_in_contact_timezone=True)
    tokyo = _at(
        campaign,
        "opened_intro",
        n=1,
        contact=ContactFactory(account=account, timezone="Asia/Tokyo"),
    )
    paris = _at(
        campaign,
        "opened_intro",
        n=1,
        contact=ContactFactory(account=account, timezone="Europe/Paris"),
    )
    now = timezone.now()
    api_client.patch(f"/campaigns/{campaign.pk}", {"steps": EDITED}, format="json")
    for enrollment, zone in ((tokyo[0], "Asia/Tokyo"), (paris[0], "Europe/Paris")):
        at = _state(enrollment)[2]
        earliest = step_send_at(
            after=now, delay_minutes=1440, timezone=zone, window=SendWindow.from_json(window)
        )
        latest = step_send_at(
            after=timezone.now(),
            delay_minutes=1440,
            timezone=zone,
            window=SendWindow.from_json(window),
        )
        assert earliest <= at <= latest


def test_moves_cost_a_few_queries_per_key_not_per_enrollment(api_client, account):
    def patch_queries(n):
        campaign = _campaign(api_client)
        for key in ("opened_intro", "pricing", "case_study"):
            _at(campaign, key, n=n)
        with CaptureQueriesContext(connection) as queries:
            response = api_client.patch(
                f"/campaigns/{campaign.pk}", {"steps": EDITED}, format="json"
            )
        assert response.status_code == 200
        return len(queries)

    assert patch_queries(1) == patch_queries(6)


def _claim(enrollment, *, started: bool):
    now = timezone.now()
    credential = enrollment.campaign.credentials.get()
    SmtpCredential.objects.filter(pk=credential.pk).update(
        daily_sent_on=now.date(), daily_sent_count=F("daily_sent_count") + 1
    )
    return SendClaim.objects.create(
        enrollment=enrollment,
        credential=credential,
        batch_id="00000000-0000-0000-0000-000000000001",
        step=3,
        claimed_at=now,
        lease_until=now + timedelta(minutes=5),
        sending_at=now if started else None,
    )


def test_sends_in_flight_go_out_as_claimed_or_are_claimed_again(
    api_client, account, django_capture_on_commit_callbacks
):
    """The edit renumbers the elements: a claim no sender has started is given back
    (with its unit of the mailbox's day), so it is claimed again under the new graph;
    one already started goes out as claimed. Both enrollments move."""
    campaign = _campaign(api_client)
    campaign.credentials.add(CredentialFactory(account=account))
    waiting, started = _at(campaign, "pricing", n=2)
    given_back, sending = _claim(waiting, started=False), _claim(started, started=True)
    with django_capture_on_commit_callbacks(execute=True):
        api_client.patch(f"/campaigns/{campaign.pk}", {"steps": EDITED}, format="json")
    assert not SendClaim.objects.filter(pk=given_back.pk).exists()
    sending.refresh_from_db()
    assert sending.finished_at is None and sending.step == 3
    assert SmtpCredential.objects.get(campaigns=campaign).daily_sent_count == 1
    assert {_state(e)[1] for e in (waiting, started)} == {"clicked_pricing"}


def test_an_edit_in_place_leaves_claims_alone(api_client, account):
    campaign = _campaign(api_client)
    campaign.credentials.add(CredentialFactory(account=account))
    claim = _claim(_at(campaign, "pricing", n=1)[0], started=False)
    steps = [*THREE_WAYS[:5], {**THREE_WAYS[5], "body_text": "Bump, edited."}]
    response = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": steps}, format="json")
    assert response.status_code == 200, response.content
    assert SendClaim.objects.open().filter(pk=claim.pk).exists()


def test_preview_answers_the_patchs_422_and_is_scoped_to_the_account(api_client, other_client):
    campaign = _campaign(api_client)
    bad = [email("intro", subject="Hi", next="nowhere")]
    preview = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": bad}, format="json"
    )
    patch = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": bad}, format="json")
    assert assert_fields(preview, "steps.0.next") == assert_fields(patch, "steps.0.next")
    assert_fields(
        api_client.post(
            f"/campaigns/{campaign.pk}/steps/preview",
            {"steps": EDITED, "name": "x"},
            format="json",
        ),
        "name",
    )
    assert_fields(
        api_client.post(f"/campaigns/{campaign.pk}/steps/preview", {}, format="json"), "steps"
    )
    assert_error(
        other_client.post(
            f"/campaigns/{campaign.pk}/steps/preview", {"steps": EDITED}, format="json"
        ),
        404,
        "campaign_not_found",
    )
    assert Enrollment.objects.filter(campaign=campaign).count() == 0


def test_a_key_whose_kind_changes_has_its_enrollments_arrive_anew(api_client):
    campaign = _campaign(api_client)
    at_bump = _at(campaign, "bump", n=1)
    steps = [*THREE_WAYS[:5], branch("bump", of="intro")]
    preview = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": steps}, format="json"
    )
    assert preview.json() == {"moves": [{"from_key": "bump", "to_key": "bump", "enrollments": 1}]}
    response = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": steps}, format="json")
    assert response.status_code == 200, response.content
    status, key, next_send_at, deadline = _state(at_bump[0])
    assert (status, key, next_send_at) == ("sent", "bump", None)
    assert deadline > timezone.now() + timedelta(minutes=4000)
