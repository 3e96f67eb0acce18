"""Click tracking (docs/deliverability.md): links rewritten in the bodies the sending
engine puts on the wire (a real SMTP server, aiosmtpd), the public redirect
GET /t/c/<token>, the first click per enrollment, the kept `clicked` stats and the
opt-in event enrollment.clicked."""

import logging
import re
from datetime import UTC, datetime

import pytest
from django.core import signing
from django.db import OperationalError, connection
from django.test import Client

from config.logs import redact
from outreach import enrollments
from outreach.campaigns import clicks
from outreach.models.campaigns import Campaign, CampaignStep
from outreach.models.sending import Enrollment
from outreach.sending import tokens
from outreach.sending.scheduler import schedule_due
from outreach.sending.send import batch_send
from tests.intake.factories import sent_enrollment
from tests.intake.helpers import events
from tests.outreach.factories import CampaignFactory, ContactFactory, EnrollmentFactory
from tests.webhooks.factories import WebhookFactory
from webhooks.models import DeliveryJob

NOW = datetime(2026, 3, 2, 10, 0, tzinfo=UTC)  # a Monday


def tracked(url: str) -> str:
    return f"T[{url}]"


# --- rewriting, with an HTML parser ------------------------------------------------------


def test_html_links_are_rewritten_and_everything_else_is_left_as_it_was():
    html = (
        "<html><head><style>a { color: red }</style></head><body>\n"
        "<p>Read <A HREF='https://a.example/x?a=1&amp;b=2' class=\"btn\">the post</A>.</p>\n"
        '<p><a href="mailto:sam@example.com">mail</a> <a href="#top">top</a>'
        ' <a href="/relative">rel</a> <a name="anchor">no link</a></p>\n'
        '<!-- <a href="https://comment.example/">a comment</a> -->\n'
        "<script>var s = '<a href=\"https://script.example/\">';</script>\n"
        "<p title='<a href=\"https://attribute.example/\">'>title</p>\n"
        '<map><area shape="rect" href="https://map.example/"></map>\n'
        "<p><a href=https://unquoted.example/path target=_blank>unquoted</a>"
        ' <a href=" https://spaced.example/ ">spaced</a></p>\n'
        '<p><a href="https://sender.example/u/tok">Unsubscribe</a></p>\n'
        "</body></html>"
    )
    out = clicks.html_links_track(
        html, link_for=tracked, keep=frozenset({"https://sender.example/u/tok"})
    )
    assert out == (
        "<html><head><style>a { color: red }</style></head><body>\n"
        '<p>Read <a href="T[https://a.example/x?a=1&amp;b=2]" class="btn">the post</A>.</p>\n'
        '<p><a href="mailto:sam@example.com">mail</a> <a href="#top">top</a>'
        ' <a href="/relative">rel</a> <a name="anchor">no link</a></p>\n'
        '<!-- <a href="https://comment.example/">a comment</a> -->\n'
        "<script>var s = '<a href=\"https://script.example/\">';</script>\n"
        "<p title='<a href=\"https://attribute.example/\">'>title</p>\n"
        '<map><area shape="rect" href="T[https://map.example/]"></map>\n'
        '<p><a href="T[https://unquoted.example/path]" target="_blank">unquoted</a>'
        ' <a href="T[https://spaced.example/]">spaced</a></p>\n'
        '<p><a href="https://sender.example/u/tok">Unsubscribe</a></p>\n'
        "</body></html>"
    )


def test_an_html_link_binds_the_url_a_reader_would_follow():
    seen = []

    def link_for(url):
        seen.append(url)
        return "https://t.example/t/c/x"

    clicks.html_links_track(
        '<a href="https://a.example/?q=&quot;x&quot;&amp;r=1">x</a><a href="HTTPS://B.example">y</a>',
        link_for=link_for,
        keep=frozenset(),
    )
    assert seen == ['https://a.example/?q="x"&r=1', "HTTPS://B.example"]


def test_html_without_links_or_broken_html_comes_back_unchanged():
    for html in ("<p>No links here</p>", "<p>Broken <a href='https://a.example/'", "<a href>x</a>"):
        assert clicks.html_links_track(html, link_for=tracked, keep=frozenset()) == html


def test_bare_urls_in_text_are_rewritten_without_the_sentence_around_them():
    text = (
        "See https://a.example/x. Or (https://b.example/y), or https://c.example/z?q=1,\n"
        "the wiki https://wiki.example/Foo_(bar)! and <https://angle.example/>.\n"
        "Mail mailto:sam@example.com or ftp://files.example/ or http://plain.example\n"
        "Unsubscribe: https://sender.example/u/tok"
    )
    out = clicks.text_links_track(
        text, link_for=tracked, keep=frozenset({"https://sender.example/u/tok"})
    )
    assert out == (
        "See T[https://a.example/x]. Or (T[https://b.example/y]), or T[https://c.example/z?q=1],\n"
        "the wiki T[https://wiki.example/Foo_(bar)]! and <T[https://angle.example/]>.\n"
        "Mail mailto:sam@example.com or ftp://files.example/ or T[http://plain.example]\n"
        "Unsubscribe: https://sender.example/u/tok"
    )


def test_a_token_names_its_link_and_refuses_any_change():
    enrollment_id = "6f1c1f5e-0f3a-4f39-9b57-1b1b54a5d2a7"
    token = clicks.click_token_make(
        enrollment_id=enrollment_id, step=2, variant="B", url="https://a.example/p?x=1"
    )
    target = clicks.click_token_read(token)
    assert target is not None
    assert (str(target.enrollment_id), target.step, target.variant, target.url) == (
        enrollment_id,
        2,
        "B",
        "https://a.example/p?x=1",
    )
    assert "/" not in token  # one path segment
    assert clicks.click_token_read(token[:-1] + ("A" if token[-1] != "A" else "B")) is None
    assert clicks.click_token_read("not-a-token") is None
    # Another URL under the same signature: refused, so no open redirect.
    value, signature = token.rsplit(".", 1)
    other = signing.Signer(salt="another", sep=".").sign_object(
        [enrollment_id.replace("-", ""), 2, "B", "https://evil.example/"], compress=True
    )
    assert clicks.click_token_read(f"{other.rsplit('.', 1)[0]}.{signature}") is None
    # An open-pixel token is not a click token.
    pixel = tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment_id)
    assert clicks.click_token_read(pixel) is None


def test_a_signed_token_for_a_url_that_is_not_http_is_refused():
    signer = signing.Signer(salt=clicks.CLICK, sep=".")
    for url in ("javascript:alert(1)", "//evil.example/", "https://", "data:text/html,x"):
        token = signer.sign_object(["6f1c1f5e0f3a4f399b571b1b54a5d2a7", 1, "A", url])
        assert clicks.click_token_read(token) is None
    for value in (["6f1c1f5e0f3a4f399b571b1b54a5d2a7", "1", "A", "https://a.example/"], ["x"], 7):
        assert clicks.click_token_read(signer.sign_object(value)) is None


# --- on the wire ---------------------------------------------------------------------------


HTML = (
    "<html><body><p>Hi {{first_name}},</p>"
    '<p>Our <a href="https://acme.example/case?ref={{email}}">case study</a>.</p>'
    "</body></html>"
)
TEXT = "Hi {{first_name}},\n\nOur case study: https://acme.example/case?ref={{email}}\n"


@pytest.fixture
def sink(smtp_sink, db):
    return smtp_sink()


def _campaign(sink, **kwargs) -> Campaign:
    campaign = CampaignFactory(with_steps=1, status=Campaign.Status.ACTIVE, **kwargs)
    CampaignStep.objects.filter(campaign=campaign).update(body_html=HTML, body_text=TEXT)
    credential = campaign.credentials.get()
    credential.smtp_host, credential.smtp_port = sink.host, sink.port
    credential.smtp_security, credential.smtp_username, credential.smtp_password = "none", "", ""
    credential.save()
    return campaign


def _send(campaign, **contact) -> Enrollment:
    enrollment = EnrollmentFactory(
        campaign=campaign,
        contact=ContactFactory(account=campaign.account, **contact),
        status=Enrollment.Status.SCHEDULED,
        next_send_at=NOW,
        dispatched_at=NOW,
    )
    for claimed in schedule_due(now=NOW):
        batch_send(
            batch_id=claimed.batch_id, credential_id=claimed.credential_id, clock=lambda: NOW
        )
    return enrollment


def _bodies(sink) -> tuple[str, str]:
    [received] = sink.messages
    msg = received.message
    return msg.get_body(("plain",)).get_content(), msg.get_body(("html",)).get_content()


def _click_paths(body: str) -> list[str]:
    return re.findall(r"http://testserver(/t/c/[A-Za-z0-9_.:-]+)", body)


def test_a_tracked_message_leads_each_link_through_the_redirect_to_its_own_url(sink):
    campaign = _campaign(sink, track_clicks=True, unsubscribe_footer=True)
    enrollment = _send(campaign, email="ada@example.org", first_name="Ada")
    text, html = _bodies(sink)

    target = "https://acme.example/case?ref=ada@example.org"
    assert target not in text and target.replace("&", "&amp;") not in html
    [text_link] = _click_paths(text)
    [html_link] = _click_paths(html)
    unsubscribe = tokens.token_make(
        purpose=tokens.UNSUBSCRIBE, enrollment_id=enrollment.pk, contact_id=enrollment.contact_id
    )
    # The opt-out footer's link and the open pixel stay as they are.
    assert f"http://testserver/u/{unsubscribe}" in text
    assert f'href="http://testserver/u/{unsubscribe}"' in html
    assert "/t/o/" in html

    client = Client()
    for path in (html_link, text_link):
        response = client.get(path)
        assert response.status_code == 302
        assert response["Location"] == target
        assert response["Referrer-Policy"] == "no-referrer"
        assert "no-cache" in response["Cache-Control"]

    enrollment.refresh_from_db()
    assert enrollment.clicked_at is not None and enrollment.clicked_on == "1A"
    assert enrollment.status == Enrollment.Status.COMPLETED  # a click changes no status
    stats = enrollments.stats_read(campaign_ids=[campaign.pk])[campaign.pk]
    assert stats["clicked"] == 1  # two clicks, one enrollment
    assert enrollments.variant_stats_read(campaign_id=campaign.pk)[(1, "A")]["clicked"] == 1
    assert enrollments.stats_check(campaign_id=campaign.pk) == {}


def test_without_track_clicks_the_links_are_left_alone(sink):
    campaign = _campaign(sink)
    _send(campaign, email="ada@example.org")
    text, html = _bodies(sink)
    assert "https://acme.example/case?ref=ada@example.org" in text
    assert 'href="https://acme.example/case?ref=ada@example.org"' in html
    assert "/t/c/" not in text + html


def test_links_and_pixel_are_built_on_the_tracking_base_url(sink, settings):
    settings.BASE_URL = "https://track.sender.example"
    campaign = _campaign(sink, track_clicks=True)
    _send(campaign, email="ada@example.org")
    text, html = _bodies(sink)
    assert re.search(r'href="https://track\.sender\.example/t/c/[^"]+"', html)
    assert 'background="https://track.sender.example/t/o/' in html
    assert "https://track.sender.example/t/c/" in text


# --- the redirect ---------------------------------------------------------------------------


def _link(enrollment, *, step=1, variant="A", url="https://acme.example/pricing") -> str:
    token = clicks.click_token_make(
        enrollment_id=enrollment.pk, step=step, variant=variant, url=url
    )
    return f"/t/c/{token}"


@pytest.mark.django_db
def test_the_first_click_is_counted_for_the_links_step_and_variant(django_assert_num_queries):
    enrollment = sent_enrollment(steps_sent=2)
    client = Client()
    assert client.get(_link(enrollment, step=2, variant="B")).status_code == 302
    enrollment.refresh_from_db()
    first = enrollment.clicked_at
    assert enrollment.clicked_on == "2B"

    # The enrollment's repeat, the first click of step 1's message: its UPDATE, and the
    # message's click counted in the hour's analytics after the click's stats (none here).
    with django_assert_num_queries(2):
        response = client.get(_link(enrollment, step=1, url="https://acme.example/other"))
    assert response["Location"] == "https://acme.example/other"
    with django_assert_num_queries(1):  # a repeat of both: one UPDATE that matches nothing
        response = client.get(_link(enrollment, step=1, url="https://acme.example/other"))
    assert response["Location"] == "https://acme.example/other"
    enrollment.refresh_from_db()
    assert (enrollment.clicked_at, enrollment.clicked_on) == (first, "2B")
    variants = enrollments.variant_stats_read(campaign_id=enrollment.campaign_id)
    assert variants[(2, "B")]["clicked"] == 1 and (1, "A") not in variants
    drift = enrollments.stats_check(campaign_id=enrollment.campaign_id)
    assert [name for name in drift if "clicked" in name] == []  # the factory counts no sends


@pytest.mark.django_db
def test_the_clicked_event_goes_only_to_webhooks_that_name_it():
    enrollment = sent_enrollment()
    account = enrollment.campaign.account
    everything = WebhookFactory(account=account, event_filters=["*"])
    clicks_only = WebhookFactory(account=account, event_filters=["enrollment.clicked"])
    both = WebhookFactory(account=account, event_filters=["*", "enrollment.clicked"])
    WebhookFactory(event_filters=["enrollment.clicked"])  # another account's

    Client().get(_link(enrollment, url="https://acme.example/pricing?plan=pro"))
    Client().get(_link(enrollment))  # a repeat fires nothing

    [event] = events("enrollment.clicked")
    enrollment.refresh_from_db()
    assert event.account_id == account.pk
    assert event.data == {
        "enrollment_id": str(enrollment.pk),
        "contact_id": str(enrollment.contact_id),
        "contact_email": enrollment.contact.email,
        "campaign_id": str(enrollment.campaign_id),
        "status": "sent",
        "sent_at": enrollment.sent_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
        "replied_at": None,
        "bounce_reason": None,
        "url": "https://acme.example/pricing?plan=pro",
        "clicked_at": enrollment.clicked_at.strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
    }
    jobs = set(DeliveryJob.objects.filter(event=event).values_list("webhook_id", flat=True))
    assert jobs == {clicks_only.pk, both.pk}
    assert not everything.wants("enrollment.clicked") and everything.wants("enrollment.opened")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "path",
    ["/t/c/not-a-token", "/t/c/{valid}x", "/t/c/{pixel}", "/t/c/.{valid}"],
)
def test_a_bad_token_is_a_404_page_and_records_nothing(path, django_assert_num_queries):
    enrollment = sent_enrollment()
    path = path.format(
        valid=_link(enrollment).removeprefix("/t/c/"),
        pixel=tokens.token_make(purpose=tokens.OPEN, enrollment_id=enrollment.pk),
    )
    with django_assert_num_queries(0):
        response = Client().get(path)
    assert response.status_code == 404
    assert response["Content-Type"].startswith("text/html")
    assert "This link is not valid" in response.content.decode()
    assert "Location" not in response
    enrollment.refresh_from_db()
    assert enrollment.clicked_at is None
    assert events() == []


@pytest.mark.django_db
def test_head_redirects_without_recording_and_other_methods_are_refused():
    enrollment = sent_enrollment()
    client = Client(enforce_csrf_checks=True)
    head = client.head(_link(enrollment))
    assert (head.status_code, head["Location"]) == (302, "https://acme.example/pricing")
    enrollment.refresh_from_db()
    assert enrollment.clicked_at is None  # a scanner's probe is not a click

    response = Client().post(_link(enrollment))
    assert response.status_code == 405
    assert response.json()["code"] == "method_not_allowed"
    assert response["Allow"] == "GET, HEAD"


@pytest.mark.django_db
def test_the_link_of_a_deleted_enrollment_still_leads_to_its_url():
    enrollment = sent_enrollment()
    path = _link(enrollment)
    enrollments.enrollments_delete(enrollment_ids=[enrollment.pk])
    response = Client().get(path)
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    assert events("enrollment.clicked") == []


@pytest.mark.django_db(transaction=True)  # autocommit, as in production
def test_a_database_failure_still_redirects_and_logs_it(caplog):
    enrollment = sent_enrollment()

    def database_down(execute, sql, params, many, context):
        raise OperationalError("server closed the connection unexpectedly")

    with (
        caplog.at_level(logging.ERROR, logger="outreach.intake.views"),
        connection.execute_wrapper(database_down),
    ):
        response = Client().get(_link(enrollment))
    assert (response.status_code, response["Location"]) == (302, "https://acme.example/pricing")
    assert f"could not record the click of {enrollment.pk}" in caplog.text
    assert "acme.example" not in caplog.text  # the link's URL is the contact's business
    enrollment.refresh_from_db()
    assert enrollment.clicked_at is None


def test_the_token_of_a_tracked_link_is_redacted_from_logs():
    token = clicks.click_token_make(
        enrollment_id="6f1c1f5e-0f3a-4f39-9b57-1b1b54a5d2a7", step=1, variant="A", url="https://a/"
    )
    assert redact(f'"GET /t/c/{token} HTTP/1.1" 302') == '"GET /t/c/[redacted] HTTP/1.1" 302'


# --- the API -------------------------------------------------------------------------------


@pytest.mark.django_db
def test_track_clicks_is_a_campaign_setting(api_client, account):
    response = api_client.post(
        "/campaigns", {"name": "Clicks", "track_clicks": True}, format="json"
    )
    assert response.status_code == 201
    campaign_id = response.json()["id"]
    assert response.json()["track_clicks"] is True
    response = api_client.patch(f"/campaigns/{campaign_id}", {"track_clicks": False}, format="json")
    assert response.json()["track_clicks"] is False
    response = api_client.patch(f"/campaigns/{campaign_id}", {"track_clicks": "yes"}, format="json")
    assert response.status_code == 422
    assert response.json()["code"] == "validation_failed"
    assert "track_clicks" in response.json()["details"]["fields"]
    assert Campaign.objects.get(pk=campaign_id).track_clicks is False


@pytest.mark.django_db
def test_enrollments_and_stats_show_the_click(api_client, account):
    enrollment = sent_enrollment(account=account)
    Client().get(_link(enrollment))
    campaign_id = enrollment.campaign_id
    [listed] = api_client.get(f"/campaigns/{campaign_id}/enrollments").json()
    assert listed["clicked_at"] is not None
    body = api_client.get(f"/campaigns/{campaign_id}/stats").json()
    assert body["clicked"] == 1
    [variant] = [v for v in body["steps"][0]["variants"] if v["variant"] == "A"]
    assert variant["clicked"] == 1
    assert api_client.get(f"/campaigns/{campaign_id}").json()["stats"]["clicked"] == 1


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("filters", "status"),
    [
        (["enrollment.clicked"], 201),
        (["*", "enrollment.clicked"], 201),
        (["enrollment.opened", "enrollment.clicked"], 201),
        (["*", "enrollment.opened"], 422),
        (["enrollment.clickd"], 422),
    ],
)
def test_webhooks_may_name_the_opt_in_event(api_client, filters, status):
    response = api_client.post(
        "/webhooks",
        # Private networks are allowed in the test settings.
        {"webhook": {"url": "http://127.0.0.1:9/hook", "event_filters": filters}},
        format="json",
    )
    assert response.status_code == status, response.json()
    if status == 201:
        assert response.json()["event_filters"] == filters
    else:
        assert list(response.json()["details"]["fields"]) == ["webhook.event_filters"]
