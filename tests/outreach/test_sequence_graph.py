"""Steps as a graph (API.md 17): keys, next, branches; written, read back resolved, and
refused at save with the path of what is wrong."""

import json
from pathlib import Path

import pytest

from outreach.models.campaigns import CampaignStep
from tests.outreach.factories import CampaignFactory, EnrollmentFactory
from tests.outreach.graph_steps import THREE_WAYS, branch, email
from tests.outreach.helpers import assert_fields

pytestmark = pytest.mark.django_db


def create(client, steps):
    return client.post("/campaigns", {"name": "Graph", "steps": steps}, format="json")


def test_a_branching_campaign_is_saved_and_read_back_resolved(api_client):
    response = create(api_client, THREE_WAYS)
    assert response.status_code == 201, response.content
    steps = response.json()["steps"]
    assert [s["key"] for s in steps] == [
        "intro",
        "opened_intro",
        "pricing",
        "clicked_pricing",
        "case_study",
        "bump",
    ]
    assert steps[0]["next"] == "opened_intro"  # the following element
    assert steps[1] == {
        "key": "opened_intro",
        "branch": {"on": "opened", "of": "intro", "within_minutes": 4320},
        "then": "pricing",
        "else": "bump",
    }
    # `of` defaults to the last email step before the branch.
    assert steps[3]["branch"]["of"] == "pricing"
    assert steps[5]["next"] == "end"
    again = api_client.get(f"/campaigns/{response.json()['id']}").json()
    assert again["steps"] == steps
    row = CampaignStep.objects.get(key="opened_intro")
    assert (row.position, row.subject, row.body_text, row.next_key) == (2, "", "", "")
    assert row.branch["then"] == "pricing" and row.branch["else"] == "bump"


def test_a_straight_line_reads_with_default_keys_and_next(api_client):
    response = create(api_client, [email(subject="One"), email(), email()])
    steps = response.json()["steps"]
    assert [(s["key"], s["next"]) for s in steps] == [
        ("step_1", "step_2"),
        ("step_2", "step_3"),
        ("step_3", "end"),
    ]


def test_steps_made_outside_the_api_read_as_a_straight_line(api_client, account):
    campaign = CampaignFactory(account=account, with_steps=2)
    steps = api_client.get(f"/campaigns/{campaign.pk}").json()["steps"]
    assert [(s["key"], s["next"]) for s in steps] == [("step_1", "step_2"), ("step_2", "end")]


def test_what_a_client_read_can_be_sent_back(api_client):
    body = create(api_client, THREE_WAYS).json()
    response = api_client.patch(f"/campaigns/{body['id']}", {"steps": body["steps"]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["steps"] == body["steps"]


@pytest.mark.parametrize(
    ("steps", "fields"),
    [
        # An unknown target, and one of each way on.
        ([email("a", subject="S", next="nowhere")], {"steps.0.next"}),
        ([email("a", subject="S"), branch("b", then="x")], {"steps.1.then"}),
        ([email("a", subject="S"), branch("b", otherwise="x")], {"steps.1.else"}),
        # Keys: format, repeated, reserved.
        ([email("Bad-Key", subject="S")], {"steps.0.key"}),
        ([email("a", subject="S"), email("a")], {"steps.1.key"}),
        ([email("end", subject="S")], {"steps.0.key"}),
        # A default key taken by an explicit one.
        ([email(subject="S", next="step_2"), email("step_1")], {"steps.1.key"}),
        # `of` names an email step, before the branch.
        ([email("a", subject="S"), branch("b", of="b")], {"steps.1.branch.of"}),
        ([email("a", subject="S"), branch("b", of="zzz")], {"steps.1.branch.of"}),
        (
            [email("a", subject="S"), branch("b", then="c", of="c"), email("c")],
            {"steps.1.branch.of"},
        ),
        # A cycle, and an element leading to itself.
        (
            [email("a", subject="S"), email("b", next="c"), email("c", next="b")],
            {"steps.2.next"},
        ),
        ([email("a", subject="S", next="a")], {"steps.0.next"}),
        # Unreachable from the first element.
        ([email("a", subject="S", next="end"), email("b")], {"steps.1"}),
        # The first element is an email step.
        ([branch("b"), email("a", subject="S")], {"steps.0.branch"}),
        # within_minutes in 1..527040, `on` one of three.
        (
            [email("a", subject="S"), branch("b", within_minutes=0)],
            {"steps.1.branch.within_minutes"},
        ),
        (
            [email("a", subject="S"), branch("b", within_minutes=527041)],
            {"steps.1.branch.within_minutes"},
        ),
        ([email("a", subject="S"), branch("b", on="replied")], {"steps.1.branch.on"}),
        # The kinds' fields are not mixed.
        ([email("a", subject="S"), {**branch("b"), "subject": "x"}], {"steps.1.subject"}),
        ([email("a", subject="S"), {**branch("b"), "next": "end"}], {"steps.1.next"}),
        (
            [email("a", subject="S"), {"key": "b", "branch": branch("b")["branch"]}],
            {
                "steps.1.then",
                "steps.1.else",
            },
        ),
        ([email("a", subject="S", then="end")], {"steps.0.then"}),
        ([{"key": "a", "subject": "S"}], {"steps.0.body_text"}),
    ],
)
def test_an_invalid_graph_is_refused_naming_the_path(api_client, steps, fields):
    assert_fields(create(api_client, steps), *fields)


def test_limits_count_email_steps_and_elements(api_client):
    # 20 email steps and 30 branches between them: 50 elements, allowed.
    steps = [email("s0", subject="S")]
    for n in range(1, 20):
        steps += [branch(f"b{n}", then=f"s{n}", otherwise=f"s{n}"), email(f"s{n}")]
    steps += [branch(f"x{n}", then=f"x{n + 1}", otherwise=f"x{n + 1}") for n in range(11)]
    steps[-1]["then"] = steps[-1]["else"] = "end"
    steps[-12]["next"] = "x0"
    assert len(steps) == 50
    assert create(api_client, steps).status_code == 201
    fields = assert_fields(create(api_client, [*steps, email("more")]), "steps")
    assert fields["steps"] == ["At most 50 elements (email steps and branches)."]
    many = [email(f"e{n}", subject="S") for n in range(21)] + [branch("b")]
    assert assert_fields(create(api_client, many), "steps")["steps"] == ["At most 20 email steps."]
    line = [email(subject="S") for _ in range(21)]
    assert assert_fields(create(api_client, line), "steps")["steps"] == ["At most 20 steps."]


def test_a_patch_edits_by_key(api_client):
    body = create(api_client, [email("a", subject="A"), email("b"), email("c")]).json()
    rows = {row.key: row.pk for row in CampaignStep.objects.filter(campaign_id=body["id"])}
    response = api_client.patch(
        f"/campaigns/{body['id']}",
        {"steps": [email("a", subject="A2"), email("new"), email("c", body="C2")]},
        format="json",
    )
    assert response.status_code == 200, response.content
    after = {row.key: row for row in CampaignStep.objects.filter(campaign_id=body["id"])}
    assert set(after) == {"a", "new", "c"}
    assert after["a"].pk == rows["a"] and after["c"].pk == rows["c"]
    assert (after["a"].subject, after["c"].body_text) == ("A2", "C2")
    assert [after[k].position for k in ("a", "new", "c")] == [1, 2, 3]


def test_a_patch_can_reorder_keys(api_client):
    body = create(api_client, [email("a", subject="A"), email("b"), email("c")]).json()
    response = api_client.patch(
        f"/campaigns/{body['id']}",
        {"steps": [email("a", subject="A"), email("c"), email("b")]},
        format="json",
    )
    assert response.status_code == 200, response.content
    assert [s["key"] for s in response.json()["steps"]] == ["a", "c", "b"]


def test_enrollments_show_current_key_and_path(api_client, account):
    campaign = CampaignFactory(account=account, with_steps=2)
    pending = EnrollmentFactory(campaign=campaign)
    waiting = EnrollmentFactory(
        campaign=campaign, status="sent", current_key="step_2", path=["step_1"], current_step=1
    )
    ended = EnrollmentFactory(
        campaign=campaign, status="completed", current_key=None, path=["step_1", "step_2"]
    )
    listed = {e["id"]: e for e in api_client.get(f"/campaigns/{campaign.pk}/enrollments").json()}
    assert (listed[str(pending.pk)]["current_key"], listed[str(pending.pk)]["path"]) == (
        "step_1",
        [],
    )
    assert listed[str(waiting.pk)]["current_key"] == "step_2"
    assert listed[str(waiting.pk)]["path"] == ["step_1"]
    assert listed[str(ended.pk)]["current_key"] is None
    assert listed[str(ended.pk)]["path"] == ["step_1", "step_2"]


def test_enrollment_list_reads_the_first_key_in_its_page_query(
    api_client, account, django_assert_max_num_queries, auth_queries
):
    campaign = CampaignFactory(account=account, with_steps=2)
    for _ in range(5):
        EnrollmentFactory(campaign=campaign)
    # auth + campaign + page (the first key in it)
    with django_assert_max_num_queries(auth_queries + 2):
        response = api_client.get(f"/campaigns/{campaign.pk}/enrollments")
    assert {e["current_key"] for e in response.json()} == {"step_1"}


def test_the_docs_example_is_a_valid_graph(api_client, account):
    """docs/outreach.md's three-branch example, as written (its mailbox left out)."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "outreach.md").read_text()
    block = text.split("**A full example: three branches.**", 1)[1]
    example = json.loads(block.split("```json", 1)[1].split("```", 1)[0])
    del example["credential_ids"]
    response = api_client.post("/campaigns", example, format="json")
    assert response.status_code == 201, response.content
    steps = {s["key"]: s for s in response.json()["steps"]}
    assert steps["bump"]["next"] == "opened_any" and steps["breakup"]["next"] == "end"
    assert steps["opened_any"]["branch"]["of"] == "any"
