"""Back office of the conversations: an account's replies with their labels, a reply's
text shown as text (its HTML sandboxed), its label and read flag edited as the API does,
and the thread of an enrollment; staff only, with bounded queries."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from outreach.models.conversations import Reply
from tests.conversations.reply_rows import reply_for, response_to
from tests.intake.factories import sent_enrollment

pytestmark = pytest.mark.django_db

CHANGELIST = "admin:outreach_reply_changelist"


@pytest.fixture
def enrollment(account):
    return sent_enrollment(account=account, steps_sent=2)


def _listed(page) -> list[Reply]:
    assert page.status_code == 200
    return list(page.context["cl"].result_list)


def test_the_list_shows_label_read_from_subject_and_campaign(admin_client, enrollment):
    reply = reply_for(enrollment, subject="Re: Pricing", label="interested", label_source="manual")

    page = admin_client.get(reverse(CHANGELIST))

    assert _listed(page) == [reply]
    html = page.content.decode()
    for column in ("from_email", "subject", "label", "read", "received_at", "campaign"):
        assert f"column-{column}" in html, column
    assert "Re: Pricing" in html and enrollment.contact.email in html
    assert enrollment.campaign.name in html and enrollment.campaign.account.email in html
    # Read-mostly: no reply is added or deleted here.
    assert admin_client.get(reverse("admin:outreach_reply_add")).status_code == 403
    delete = reverse("admin:outreach_reply_delete", args=[reply.pk])
    assert admin_client.get(delete).status_code == 403


def test_the_list_is_per_account(admin_client, enrollment):
    mine = reply_for(enrollment)
    theirs = reply_for(sent_enrollment())

    everyone = admin_client.get(reverse(CHANGELIST))
    assert set(_listed(everyone)) == {mine, theirs}
    # The account column links to that account's replies.
    link = f"?account__id__exact={enrollment.campaign.account_id}"
    assert link in everyone.content.decode()
    page = admin_client.get(reverse(CHANGELIST) + link)
    assert _listed(page) == [mine]


def test_the_list_filters_by_label_read_and_label_source(admin_client, enrollment):
    auto = reply_for(enrollment, label="out_of_office", label_source="auto")
    manual = reply_for(enrollment, label="interested", label_source="manual", read=True)
    plain = reply_for(enrollment)
    url = reverse(CHANGELIST)

    assert _listed(admin_client.get(url, {"label__exact": "interested"})) == [manual]
    assert _listed(admin_client.get(url, {"label_source__exact": "auto"})) == [auto]
    assert set(_listed(admin_client.get(url, {"read__exact": "0"}))) == {auto, plain}
    assert _listed(admin_client.get(url, {"read__exact": "1"})) == [manual]


def test_the_list_searches_sender_and_subject(admin_client, enrollment):
    pricing = reply_for(enrollment, subject="Re: Pricing question")
    other = reply_for(sent_enrollment(account=enrollment.campaign.account), subject="Re: Hi")
    url = reverse(CHANGELIST)

    assert _listed(admin_client.get(url, {"q": "pricing"})) == [pricing]
    assert _listed(admin_client.get(url, {"q": other.from_email})) == [other]
    assert _listed(admin_client.get(url, {"q": "nobody@nowhere.example"})) == []


def test_a_reply_shows_its_text_as_text_and_its_html_sandboxed(admin_client, enrollment):
    reply = reply_for(
        enrollment,
        new_text="Yes <script>alert(1)</script> please",
        text="Yes <script>alert(1)</script> please\n> quoted",
        html='<p>Yes <img src="https://tracker.example/p.gif"> please</p>',
        attachments=[{"filename": "deck.pdf", "content_type": "application/pdf", "size": 1200}],
    )

    page = admin_client.get(reverse("admin:outreach_reply_change", args=[reply.pk]))

    assert page.status_code == 200
    html = page.content.decode()
    assert "<script>alert(1)" not in html
    assert "<pre>Yes &lt;script&gt;alert(1)&lt;/script&gt; please</pre>" in html
    assert "&gt; quoted" in html
    # The HTML only as the escaped srcdoc of a sandboxed iframe whose document loads nothing.
    assert '<img src="https://tracker.example' not in html
    assert '<iframe sandbox="" referrerpolicy="no-referrer"' in html
    srcdoc = html.split('srcdoc="', 1)[1].split('"', 1)[0]
    assert "&lt;img src=&quot;https://tracker.example/p.gif&quot;&gt;" in srcdoc
    assert "Content-Security-Policy" in srcdoc and "default-src &#x27;none&#x27;" in srcdoc
    assert "<td>deck.pdf</td><td>application/pdf</td><td>1200</td>" in html
    thread = reverse("admin:outreach_reply_thread", args=[enrollment.pk])
    assert f'href="{thread}"' in html


def test_a_reply_without_bodies_shows_dashes(admin_client, enrollment):
    reply = reply_for(enrollment, text="", new_text="", html="", body_purged_at=timezone.now())
    page = admin_client.get(reverse("admin:outreach_reply_change", args=[reply.pk]))
    assert page.status_code == 200
    assert "<iframe" not in page.content.decode()


def test_staff_set_the_label_and_read_flag_as_the_api_does(admin_client, enrollment):
    reply = reply_for(enrollment, label="auto_reply", label_source="auto", text="kept")
    url = reverse("admin:outreach_reply_change", args=[reply.pk])

    # The read flag alone: the intake's label stays its own.
    assert admin_client.post(url, {"label": "auto_reply", "read": "on"}).status_code == 302
    reply.refresh_from_db()
    assert (reply.label, reply.label_source, reply.read) == ("auto_reply", "auto", True)

    assert admin_client.post(url, {"label": "meeting_booked", "read": "on"}).status_code == 302
    reply.refresh_from_db()
    assert (reply.label, reply.label_source, reply.read) == ("meeting_booked", "manual", True)

    assert admin_client.post(url, {"label": ""}).status_code == 302  # cleared, unread
    reply.refresh_from_db()
    assert (reply.label, reply.label_source, reply.read) == ("", "", False)

    refused = admin_client.post(url, {"label": "happy", "read": "on"})
    assert refused.status_code == 200 and refused.context["adminform"].form.errors
    reply.refresh_from_db()
    assert (reply.label, reply.read, reply.text) == ("", False, "kept")
    # Nothing but the two editable fields changes from the form.
    admin_client.post(url, {"label": "other", "subject": "changed", "text": "changed"})
    reply.refresh_from_db()
    assert (reply.label, reply.subject, reply.text) == ("other", "Re: Hello", "kept")


def test_the_thread_shows_steps_replies_and_responses_in_time_order(admin_client, enrollment):
    step1, step2 = enrollment.messages.order_by("step")
    step1.text = "Hi <b>Ada</b>, step one."
    step1.save()
    reply = reply_for(
        enrollment,
        received_at=step2.sent_at + timedelta(minutes=5),
        new_text="Tell me <more>",
        label="interested",
        label_source="manual",
    )
    response_to(reply, body_text="Great, Tuesday?")
    response_to(reply, status="failed", sent_at=None, error="mailbox disabled")

    page = admin_client.get(reverse("admin:outreach_reply_thread", args=[enrollment.pk]))

    assert page.status_code == 200
    assert [e.kind for e in page.context["entries"]] == [
        "step",
        "step",
        "reply",
        "response",
        "response",
    ]
    html = page.content.decode()
    body = html.split('<table id="thread">', 1)[1]
    assert body.index("Step 1 sent") < body.index("Step 2 sent") < body.index("Interested")
    assert body.index("Interested") < body.index("Great, Tuesday?")
    assert "<pre>Hi &lt;b&gt;Ada&lt;/b&gt;, step one.</pre>" in body
    assert "<pre>Tell me &lt;more&gt;</pre>" in body
    assert "Response, failed: mailbox disabled" in body
    assert reverse("admin:outreach_reply_change", args=[reply.pk]) in body
    assert f"Conversation with {enrollment.contact.email}" in html


def test_the_enrollment_page_links_to_its_thread(admin_client, enrollment):
    page = admin_client.get(reverse("admin:outreach_enrollment_change", args=[enrollment.pk]))
    thread = reverse("admin:outreach_reply_thread", args=[enrollment.pk])
    assert f'href="{thread}"' in page.content.decode()


def test_the_thread_of_an_unknown_enrollment_is_a_404(admin_client):
    missing = "00000000-0000-0000-0000-000000000000"
    assert (
        admin_client.get(reverse("admin:outreach_reply_thread", args=[missing])).status_code == 404
    )


@pytest.fixture
def clerk(django_user_model):
    """A staff user with no permission yet."""
    return django_user_model.objects.create_user("clerk", password="pw-clerk-1", is_staff=True)


def test_pages_are_for_staff_with_the_permission(client, django_user_model, clerk, enrollment):
    reply = reply_for(enrollment)
    pages = [
        reverse(CHANGELIST),
        reverse("admin:outreach_reply_change", args=[reply.pk]),
        reverse("admin:outreach_reply_thread", args=[enrollment.pk]),
    ]
    for url in pages:  # anonymous: the login page
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    customer = django_user_model.objects.create_user("customer", password="pw-customer-1")
    client.force_login(customer)
    for url in pages:  # not staff: the login page too
        response = client.get(url)
        assert response.status_code == 302 and "/login/" in response["Location"], url
    client.force_login(clerk)
    for url in pages:  # staff without the permission
        assert client.get(url).status_code == 403, url
    clerk.user_permissions.add(Permission.objects.get(codename="view_reply"))
    for url in pages:
        assert client.get(url).status_code == 200, url
    # Viewing is not changing.
    change = client.post(pages[1], {"label": "interested"})
    assert change.status_code == 403
    reply.refresh_from_db()
    assert reply.label == ""


def _queries(admin_client, url) -> int:
    admin_client.get(url)  # warm the session and the content types
    with CaptureQueriesContext(connection) as queries:
        assert admin_client.get(url).status_code == 200
    return len(queries)


def test_the_pages_cost_the_same_queries_for_one_reply_or_thirty(admin_client, enrollment):
    reply = reply_for(enrollment)
    response_to(reply)
    changelist = reverse(CHANGELIST)
    thread = reverse("admin:outreach_reply_thread", args=[enrollment.pk])
    change = reverse("admin:outreach_reply_change", args=[reply.pk])
    one = {url: _queries(admin_client, url) for url in (changelist, thread)}
    change_page = _queries(admin_client, change)

    for _ in range(29):
        other = sent_enrollment(account=enrollment.campaign.account)
        reply_for(other)
        response_to(reply_for(enrollment))

    assert {url: _queries(admin_client, url) for url in (changelist, thread)} == one
    assert _queries(admin_client, change) == change_page
    assert change_page <= 12
