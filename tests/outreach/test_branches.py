"""Sequences that react (API.md 17): an enrollment moves through its campaign's graph,
waits at a branch, and is decided by an open or click of its messages (through the real
pixel and click endpoints) or by the branch's deadline (a scheduler run), once."""

import re
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from outreach.enrollments import stats_check
from outreach.enrollments.transitions import enrollment_postpone
from outreach.intake.services import enrollment_mark_opened
from outreach.models.branches import BranchDecision
from outreach.models.sending import Enrollment, Message
from outreach.sending import tokens
from tests.outreach.branching import (
    DAY,
    NUDGE_THEN_BRANCH,
    branch,
    branched_events,
    email,
    enrolled,
    graph_campaign,
    later,
    message_of,
    run,
)

pytestmark = pytest.mark.django_db

# intro, then wait up to a day for an open of it: the case study, or a bump.
OPENED_INTRO = [
    email("intro", "wait"),
    branch("wait", of="intro", then="case_study", else_="bump"),
    email("case_study", "end"),
    email("bump", "end", delay=60),
]


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _pixel(enrollment, step=None) -> int:
    token = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk, step=step)
    return Client().get(f"/t/o/{token}.gif").status_code


def _links(received) -> list[str]:
    html = received.message.get_body(("html",)).get_content()
    return re.findall(r'href="(http://[^"]+/t/c/[^"]+)"', html)


def test_a_linear_campaign_keeps_its_keys_and_path(sink):
    campaign = graph_campaign(sink, [email("one"), email("two", delay=60)])
    enrollment = enrolled(campaign)
    now = timezone.now()
    run(now)
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_step, enrollment.last_step) == ("sent", 1, 1)
    assert (enrollment.current_key, enrollment.path) == ("two", ["one"])
    assert enrollment.next_send_at == later(now, 60)
    assert message_of(enrollment, "one").step == 1
    run(later(now, 61))
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key, enrollment.path) == (
        "completed",
        None,
        ["one", "two"],
    )


def test_an_open_after_reaching_the_branch_moves_it_to_then_at_once(sink, settings):
    settings.SENDING_SCHEDULE_ON_DISPATCH = False
    campaign = graph_campaign(sink, OPENED_INTRO)
    enrollment = enrolled(campaign, email="ada@example.org")
    run(timezone.now())
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key, enrollment.next_send_at) == (
        "sent",
        "wait",
        None,
    )
    assert enrollment.branch_deadline is not None and enrollment.path == ["intro"]
    # The pixel of the email as sent names its step.
    [received] = sink.messages
    html = received.message.get_body(("html",)).get_content()
    [pixel] = re.findall(r'background="http://[^"]+(/t/o/[^"]+\.gif)"', html)
    assert Client().get(pixel).status_code == 200

    enrollment.refresh_from_db()
    assert (enrollment.current_key, enrollment.path) == ("case_study", ["intro", "wait"])
    assert enrollment.branch_deadline is None and enrollment.next_send_at is not None
    assert message_of(enrollment, "intro").opened_at is not None
    assert branched_events() == [
        {
            "enrollment_id": str(enrollment.pk),
            "campaign_id": str(campaign.pk),
            "contact_id": str(enrollment.contact_id),
            "contact_email": "ada@example.org",
            "branch_key": "wait",
            "outcome": "then",
            "next_key": "case_study",
        }
    ]
    run(timezone.now())
    assert [m.step_key for m in Message.objects.order_by("sent_at")] == ["intro", "case_study"]
    # A reply now answers the case study: position 3, the second email sent.
    from outreach.enrollments import variant_stats_read
    from outreach.intake.services import enrollment_mark_replied

    assert enrollment_mark_replied(enrollment_id=enrollment.pk)
    enrollment.refresh_from_db()
    assert (enrollment.current_step, enrollment.last_step, enrollment.replied_on) == (2, 3, "3A")
    assert variant_stats_read(campaign_id=campaign.pk)[(3, "A")]["replied"] == 1
    assert stats_check(campaign_id=campaign.pk) == {}


def test_an_open_before_reaching_the_branch_decides_it_on_arrival(sink):
    campaign = graph_campaign(sink, NUDGE_THEN_BRANCH)
    now = timezone.now() - timedelta(hours=2)
    enrollment = enrolled(campaign, at=now)
    run(now)
    assert _pixel(enrollment, step=1) == 200  # the intro opened, nudge not sent yet
    enrollment.refresh_from_db()
    assert enrollment.current_key == "nudge"
    run(timezone.now())
    enrollment.refresh_from_db()
    assert enrollment.path == ["intro", "nudge", "wait"]
    assert (enrollment.current_key, enrollment.current_step, enrollment.last_step) == (
        "case_study",
        2,
        2,
    )
    [decision] = BranchDecision.objects.filter(enrollment=enrollment)
    assert (decision.key, decision.outcome, decision.next_key) == ("wait", "then", "case_study")


def test_the_deadline_without_the_event_takes_else_in_a_scheduler_run(sink, api_client, account):
    campaign = graph_campaign(sink, OPENED_INTRO, account=account)
    start = timezone.now() - timedelta(days=2)
    waiting, opener = enrolled(campaign, at=start), enrolled(campaign, at=start)
    run(start)
    assert Enrollment.objects.filter(current_key="wait").count() == 2
    body = api_client.get(f"/campaigns/{campaign.pk}/stats").json()
    assert body["branches"] == [{"key": "wait", "waiting": 2, "then_count": 0, "else_count": 0}]
    assert [s["key"] for s in body["steps"]] == ["intro", "case_study", "bump"]
    enrollment_mark_opened(enrollment_id=opener.pk, at=later(start, 5))

    run(later(start, DAY + 1))  # past the deadline: decided, then the bump is due in 60'
    waiting.refresh_from_db()
    assert (waiting.current_key, waiting.path) == ("bump", ["intro", "wait"])
    assert waiting.next_send_at == later(start, DAY + 61)
    assert [(e["enrollment_id"], e["outcome"]) for e in branched_events()] == [
        (str(opener.pk), "then"),
        (str(waiting.pk), "else"),
    ]
    body = api_client.get(f"/campaigns/{campaign.pk}/stats").json()
    assert body["branches"] == [{"key": "wait", "waiting": 0, "then_count": 1, "else_count": 1}]
    run(later(start, DAY + 61))
    assert message_of(waiting, "bump").to_email == waiting.contact.email
    assert stats_check(campaign_id=campaign.pk) == {}


def test_a_click_decides_a_branch_on_clicks_and_an_open_does_not(sink):
    elements = [
        email("intro", "clicked"),
        branch("clicked", on="clicked", of="intro", then="pricing", else_="end"),
        email("pricing", "end"),
    ]
    campaign = graph_campaign(sink, elements, track_clicks=True)
    enrollment = enrolled(campaign)
    run(timezone.now())
    assert _pixel(enrollment, step=1) == 200
    enrollment.refresh_from_db()
    assert enrollment.current_key == "clicked"  # an open is not a click
    [link] = _links(sink.messages[0])
    assert Client().get(link).status_code == 302
    enrollment.refresh_from_db()
    assert (enrollment.current_key, enrollment.path) == ("pricing", ["intro", "clicked"])
    intro = message_of(enrollment, "intro")
    assert intro.clicked_at is not None and intro.opened_at is not None
    assert enrollment.clicked_on == "1A"


def test_of_any_counts_an_old_pixel_for_the_last_message(sink):
    elements = [
        email("intro", "nudge"),
        email("nudge", "wait", delay=60),
        branch("wait", on="opened_or_clicked", of="any", then="end", else_="bump"),
        email("bump", "end"),
    ]
    campaign = graph_campaign(sink, elements)
    enrollment = enrolled(campaign, at=timezone.now() - timedelta(hours=2))
    run(timezone.now() - timedelta(hours=2))
    run(timezone.now())
    enrollment.refresh_from_db()
    assert enrollment.current_key == "wait"
    assert _pixel(enrollment) == 200  # a pixel naming no step: the last message, nudge
    assert message_of(enrollment, "nudge").opened_at is not None
    assert message_of(enrollment, "intro").opened_at is None
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key) == ("completed", None)
    assert enrollment.path == ["intro", "nudge", "wait"]
    campaign.refresh_from_db()
    assert campaign.status == "completed"


def test_chained_branches_are_walked_in_one_decision(sink):
    elements = [
        email("intro", "opened"),
        branch("opened", on="opened", of="intro", then="clicked", else_="end"),
        branch("clicked", on="clicked", of="any", then="demo", else_="faq"),
        email("demo", "end"),
        email("faq", "end"),
    ]
    campaign = graph_campaign(sink, elements, track_clicks=True)
    enrollment = enrolled(campaign)
    run(timezone.now())
    [link] = _links(sink.messages[0])
    assert Client().get(link).status_code == 302  # a click first: "opened" still waits
    enrollment.refresh_from_db()
    assert enrollment.current_key == "opened"
    assert _pixel(enrollment, step=1) == 200
    enrollment.refresh_from_db()
    assert (enrollment.current_key, enrollment.path) == ("demo", ["intro", "opened", "clicked"])
    assert [(e["branch_key"], e["outcome"], e["next_key"]) for e in branched_events()] == [
        ("opened", "then", "clicked"),
        ("clicked", "then", "demo"),
    ]


def test_an_out_of_office_return_while_waiting_holds_the_next_step(sink):
    campaign = graph_campaign(sink, OPENED_INTRO)
    enrollment = enrolled(campaign)
    now = timezone.now()
    run(now)
    back = later(now, 3 * DAY)
    assert enrollment_postpone(enrollment_id=enrollment.pk, until=back, now=now)
    enrollment.refresh_from_db()
    assert enrollment.held_until == back and enrollment.next_send_at is None
    assert _pixel(enrollment, step=1) == 200
    enrollment.refresh_from_db()
    assert (enrollment.current_key, enrollment.next_send_at) == ("case_study", back)
    assert enrollment.held_until is None
    assert run(later(now, 10)) == []  # not before the return
    run(later(back, 1))
    assert message_of(enrollment, "case_study").sent_at == later(back, 1)


def test_sending_status_shows_who_waits_at_a_branch_and_until_when(sink, api_client, account):
    campaign = graph_campaign(sink, OPENED_INTRO, account=account)
    enrollment = enrolled(campaign)
    run(timezone.now())
    enrollment.refresh_from_db()
    enrolled(campaign)
    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    planned, waiting = body["upcoming"]
    assert (planned["key"], planned["step"]) == ("intro", 1)
    assert waiting["enrollment_id"] == str(enrollment.pk)
    assert (waiting["key"], waiting["reason"], waiting["step"]) == (
        "wait",
        "waiting_on_branch",
        None,
    )
    assert waiting["until"] == enrollment.branch_deadline.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def test_the_thread_shows_the_path_taken(sink, api_client, account):
    campaign = graph_campaign(sink, OPENED_INTRO, account=account)
    enrollment = enrolled(campaign)
    run(timezone.now())
    assert _pixel(enrollment, step=1) == 200
    run(timezone.now())
    url = f"/campaigns/{campaign.pk}/enrollments/{enrollment.pk}/thread"
    entries = api_client.get(url).json()
    assert [e["type"] for e in entries] == ["step", "branch", "step"]
    assert [e["step"]["key"] for e in entries if e["type"] == "step"] == ["intro", "case_study"]
    assert entries[1]["branch"] == {"key": "wait", "outcome": "then", "next_key": "case_study"}


def test_message_opens_and_clicks_are_per_message_the_enrollments_the_first(sink):
    campaign = graph_campaign(sink, [email("one"), email("two", delay=60)], track_clicks=True)
    now = timezone.now() - timedelta(hours=2)
    enrollment = enrolled(campaign, at=now)
    run(now)
    run(timezone.now())
    assert _pixel(enrollment, step=2) == 200
    assert _pixel(enrollment, step=1) == 200
    assert _pixel(enrollment, step=1) == 200  # a repeat changes nothing
    one, two = message_of(enrollment, "one"), message_of(enrollment, "two")
    assert one.opened_at > two.opened_at
    enrollment.refresh_from_db()
    assert enrollment.opened_at == two.opened_at and enrollment.opened_on == "2A"
    [link] = _links(sink.messages[0])
    assert Client().get(link).status_code == 302
    assert message_of(enrollment, "one").clicked_at is not None
    assert message_of(enrollment, "two").clicked_at is None


def test_a_reply_while_waiting_ends_it_and_its_deadline_decides_nothing(sink):
    from outreach.intake.services import enrollment_mark_replied

    campaign = graph_campaign(sink, OPENED_INTRO)
    start = timezone.now() - timedelta(days=2)
    enrollment = enrolled(campaign, at=start)
    run(start)
    assert enrollment_mark_replied(enrollment_id=enrollment.pk, at=later(start, 10))
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key, enrollment.branch_deadline) == (
        "replied",
        None,
        None,
    )
    run(later(start, DAY + 1))
    assert branched_events() == [] and Message.objects.count() == 1


def test_an_edit_that_brings_enrollments_to_a_branch_decides_those_whose_open_came(
    sink, api_client, account, django_capture_on_commit_callbacks
):
    """An edit removes the step two enrollments wait to send; its old next is a branch on
    opens of the intro: the one that opened goes on to `then` at once (the branch's own
    decision, announced), the other waits from the edit; the edit announces nothing."""
    elements = [
        email("intro", "hold"),
        email("hold", "wait", delay=DAY),
        branch("wait", of="intro", then="more", else_="end"),
        email("more", "end", delay=60),
    ]
    campaign = graph_campaign(sink, elements, account=account)
    waiter, opener = enrolled(campaign), enrolled(campaign)
    now = timezone.now()
    run(now)
    assert enrollment_mark_opened(enrollment_id=opener.pk, step=1)
    steps = api_client.get(f"/campaigns/{campaign.pk}").json()["steps"]
    kept = [step for step in steps if step["key"] != "hold"]
    kept[0]["next"] = "wait"
    preview = api_client.post(
        f"/campaigns/{campaign.pk}/steps/preview", {"steps": kept}, format="json"
    )
    assert preview.json()["moves"] == [{"from_key": "hold", "to_key": "wait", "enrollments": 2}]
    with django_capture_on_commit_callbacks(execute=True):
        response = api_client.patch(f"/campaigns/{campaign.pk}", {"steps": kept}, format="json")
    assert response.status_code == 200, response.json()
    waiter.refresh_from_db()
    opener.refresh_from_db()
    assert (waiter.current_key, waiter.next_send_at) == ("wait", None)
    assert waiter.branch_deadline > now
    assert (opener.current_key, opener.branch_deadline) == ("more", None)
    assert [(e["branch_key"], e["outcome"], e["next_key"]) for e in branched_events()] == [
        ("wait", "then", "more")
    ]


def test_a_deadline_to_the_end_completes_the_enrollment_and_its_campaign(sink):
    elements = [email("intro", "wait"), branch("wait", of="intro", then="more", else_="end")]
    campaign = graph_campaign(sink, [*elements, email("more", "end")])
    start = timezone.now() - timedelta(days=2)
    enrollment = enrolled(campaign, at=start)
    run(start)
    run(later(start, DAY + 1))
    enrollment.refresh_from_db()
    assert (enrollment.status, enrollment.current_key, enrollment.path) == (
        "completed",
        None,
        ["intro", "wait"],
    )
    campaign.refresh_from_db()
    assert campaign.status == "completed"
    assert [(e["outcome"], e["next_key"]) for e in branched_events()] == [("else", "end")]


def test_campaign_stats_recounts_the_branches_decisions_and_repairs_them(sink, api_client, account):
    from django.core.management import CommandError, call_command

    from outreach.models.campaigns import BranchStats

    campaign = graph_campaign(sink, OPENED_INTRO, account=account)
    start = timezone.now() - timedelta(days=2)
    enrolled(campaign, at=start)  # waits, then its deadline sends it to else
    opener = enrolled(campaign, at=start)
    run(start)
    enrollment_mark_opened(enrollment_id=opener.pk, at=later(start, 5))
    run(later(start, DAY + 1))
    call_command("campaign_stats", str(campaign.pk))  # kept on write: no drift
    # A count lost (a row edited by hand, a bug): the command says so, then repairs it.
    BranchStats.objects.filter(campaign=campaign).update(then_count=0, else_count=5)
    with pytest.raises(CommandError):
        call_command("campaign_stats", str(campaign.pk))
    call_command("campaign_stats", str(campaign.pk), "--repair")
    body = api_client.get(f"/campaigns/{campaign.pk}/stats").json()
    assert body["branches"] == [{"key": "wait", "waiting": 0, "then_count": 1, "else_count": 1}]
    call_command("campaign_stats", str(campaign.pk))
    assert stats_check(campaign_id=campaign.pk) == {}
