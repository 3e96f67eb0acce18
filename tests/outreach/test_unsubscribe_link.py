"""{{unsubscribe_url}} in bodies and the campaign's unsubscribe footer, on the messages
a real SMTP server (aiosmtpd) receives."""

from datetime import UTC, datetime

import pytest
from django.test import Client

from outreach.campaigns.rendering import FOOTER_TEXT
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.outreach.helpers import assert_fields

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)
HTML = "<html><body><p>Hi {{first_name}}</p></body></html>"

pytestmark = pytest.mark.django_db


@pytest.fixture
def sink(smtp_sink):
    return smtp_sink()


def _send(sink, *, body_text="Hi {{first_name}}", body_html="", **campaign_kwargs):
    """One step sent to one contact; returns (the parsed message, the enrollment)."""
    campaign = CampaignFactory(status=Campaign.Status.ACTIVE, **campaign_kwargs)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username = "none", ""
    credential.save()
    CampaignStep.objects.filter(campaign=campaign).update(body_text=body_text, body_html=body_html)
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, first_name="Ada"),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
    )
    for batch in schedule_due(now=NOW):
        batch_send(batch_id=batch.batch_id, credential_id=batch.credential_id, clock=lambda: NOW)
    [received] = sink.messages
    return received.message, enrollment


def _parts(message) -> dict[str, str]:
    return {
        part.get_content_type(): part.get_content().replace("\r\n", "\n")
        for part in message.walk()
        if not part.is_multipart()
    }


def _url(settings, enrollment) -> str:
    token = tokens.token_make(
        purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk, contact_id=enrollment.contact_id
    )
    return f"{settings.BASE_URL}/u/{token}"


def test_the_variable_is_the_list_unsubscribe_link(sink, settings):
    message, enrollment = _send(
        sink,
        body_text="Hi {{first_name}}. Opt out: {{unsubscribe_url}}",
        body_html='<p>Hi. <a href="{{ unsubscribe_url }}">Opt out</a></p>',
    )

    url = _url(settings, enrollment)
    parts = _parts(message)
    assert parts["text/plain"].startswith(f"Hi Ada. Opt out: {url}")
    assert f'<a href="{url}">Opt out</a>' in parts["text/html"]
    assert message["List-Unsubscribe"].startswith(f"<{url}>")
    # No footer unless the campaign asks for one.
    assert FOOTER_TEXT not in parts["text/plain"]
    # The link is the contact's unsubscribe page.
    assert Client().get(url.removeprefix(settings.BASE_URL)).status_code == 200


def test_the_footer_is_added_once_to_each_part(sink, settings):
    message, enrollment = _send(sink, body_html=HTML, unsubscribe_footer=True)

    url = _url(settings, enrollment)
    parts = _parts(message)
    text, html = parts["text/plain"], parts["text/html"]
    assert text.startswith("Hi Ada\n\n--\n")
    assert text.count(FOOTER_TEXT) == 1 and text.count(url) == 1
    assert text.rstrip().endswith(f"{FOOTER_TEXT} {url}")
    assert html.count(f'<a href="{url}">Unsubscribe</a>') == 1
    assert html.count(url) == 1
    # Inside the body, before the open pixel and the closing tag.
    assert html.index("Unsubscribe</a>") < html.index("/t/o/") < html.index("</body>")


def test_a_part_that_places_the_link_gets_no_footer(sink, settings):
    message, enrollment = _send(
        sink,
        body_text="Hi. Opt out here: {{unsubscribe_url}}",
        body_html=HTML,
        unsubscribe_footer=True,
    )

    url = _url(settings, enrollment)
    parts = _parts(message)
    assert parts["text/plain"].count(url) == 1
    assert FOOTER_TEXT not in parts["text/plain"]
    # The HTML part did not place it: it gets the footer.
    assert parts["text/html"].count(f'href="{url}"') == 1


def test_a_text_only_step_gets_one_footer(sink, settings):
    message, enrollment = _send(sink, unsubscribe_footer=True)

    assert message.get_content_type() == "text/plain"
    body = message.get_content()
    assert body.count(FOOTER_TEXT) == 1
    assert body.count(_url(settings, enrollment)) == 1


def test_the_link_is_escaped_in_html_and_plain_in_text(sink, settings):
    settings.BASE_URL = "http://testserver/mail?tenant=1&lang=en"
    message, enrollment = _send(
        sink,
        body_text="Hi",
        body_html='<html><body><p><a href="{{unsubscribe_url}}">x</a></p></body></html>',
        unsubscribe_footer=True,
    )

    url = _url(settings, enrollment)
    escaped = url.replace("&", "&amp;")
    parts = _parts(message)
    assert url in parts["text/plain"] and "&amp;" not in parts["text/plain"]
    html = parts["text/html"]
    assert f'<a href="{escaped}">x</a>' in html
    assert "Unsubscribe</a>" not in html  # the body placed the link: no footer
    assert url not in html  # never unescaped


@pytest.mark.parametrize(
    ("step", "field"),
    [
        ({"subject": "Hi {{unsubscribe_url}}", "body_text": "x"}, "steps.0.subject"),
        (
            {"subject": "Hi", "body_text": "x", "variants": [{"subject": "{{unsubscribe_url}}"}]},
            "steps.0.variants.0",
        ),
    ],
)
def test_the_variable_is_only_for_bodies(api_client, step, field):
    step.get("variants", [{}])[0].setdefault("body_text", "x")
    response = api_client.post("/campaigns", {"name": "c", "steps": [step]}, format="json")

    fields = assert_fields(response, field if field != "steps.0.variants.0" else f"{field}.subject")
    assert "unsubscribe_url only in body_text and body_html" in next(iter(fields.values()))[0]
    assert not Campaign.objects.exists()


def test_the_variable_is_accepted_in_bodies(api_client):
    response = api_client.post(
        "/campaigns",
        {
            "name": "c",
            "unsubscribe_footer": True,
            "steps": [
                {
                    "subject": "Hi",
                    "body_text": "Bye: {{unsubscribe_url}}",
                    "body_html": "<a href='{{ unsubscribe_url }}'>bye</a>",
                }
            ],
        },
        format="json",
    )

    assert response.status_code == 201, response.content
    assert response.json()["unsubscribe_footer"] is True
    assert response.json()["steps"][0]["body_text"] == "Bye: {{unsubscribe_url}}"


def test_unsubscribe_footer_is_a_strict_boolean(api_client):
    response = api_client.post(
        "/campaigns", {"name": "c", "unsubscribe_footer": "yes"}, format="json"
    )
    assert_fields(response, "unsubscribe_footer")
    response = api_client.post(
        "/campaigns", {"name": "c", "stop_on_domain_reply": 1}, format="json"
    )
    assert_fields(response, "stop_on_domain_reply")
