"""Every admin page a staff member reaches from the index answers (no 500) and names its
models as written for people: each link of the index (every list, every add page, the
staff dashboard), then from each list its first row's change page. The product's name is
in the header and the title, and no label is Django's automatic one ("Replys", "Smtp
credential", "Api keys")."""

import re
from html import unescape

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from accounts.models import Account
from billing.models import PspEvent
from outreach.models.blocklist import BlocklistEntry
from outreach.models.contacts import ContactImport, Suppression
from tests.conversations.factories import ReplyFactory
from tests.foundation.test_admin_pages import some_of_everything  # noqa: F401 - a fixture
from tests.outreach.dashboard_data import AnalyticsHourFactory

pytestmark = pytest.mark.django_db

# Words people write in capitals, which Django's automatic names write in lower case.
ACRONYMS = re.compile(r"\b(smtp|imap|api|o auth|oauth|psp|dns|url)\b")
# An English plural Django gets wrong by adding an "s": "replys", "statss", "boxs".
AUTO_PLURAL = re.compile(r"([^aeiou]ys|ss|xs|chs|shs)$")


def _links(page: str) -> list[str]:
    return sorted(
        {unescape(h) for h in re.findall(r'href="(/admin/[^"#?]*)"', page)}
        - {"/admin/logout/", "/admin/password_change/"}
    )


def _checked(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    page = response.content.decode()
    assert "Django administration" not in page and "Django site admin" not in page, url
    assert re.search(r"<title>[^<]*Outreach Service admin</title>", page), url
    assert '<div id="site-name"><a href="/admin/">Outreach Service</a></div>' in page, url
    for bad in ("Replys", "Smtp credential", "Api key", "O auth", "statss"):
        assert bad not in page, (url, bad)
    return page


def test_every_page_reached_from_the_index_answers_with_the_products_name(
    admin_client,
    some_of_everything,  # noqa: F811 - the fixture imported above
):
    AnalyticsHourFactory(sent=40, bounced_hard=10)
    account = Account.objects.first()
    Group.objects.create(name="support")
    BlocklistEntry.objects.create(account=account, value="spam.example", kind="domain")
    Suppression.objects.create(
        account=account, email_lower="gone@example.org", reason="unsubscribed", at=timezone.now()
    )
    ContactImport.objects.create(account=account, source_format="csv", source_data=b"email\n")
    ReplyFactory()
    PspEvent.objects.create(
        id="evt_admin_reach", type="invoice.paid", outcome="ignored", payload={}
    )
    index = _checked(admin_client, reverse("admin:index"))
    reached = _links(index)
    assert "/admin/dashboard/" in reached
    lists = [url for url in reached if re.fullmatch(r"/admin/\w+/\w+/", url)]
    assert len(lists) == len(admin.site._registry)  # every model's list is linked
    changes = []
    for url in reached:
        page = _checked(admin_client, url)
        if url in lists:
            rows = re.findall(r'<th class="field-[^"]*"><a href="(/admin/[^"]+/change/)', page)
            model = apps.get_model(*url.strip("/").split("/")[1:3])
            # A list with rows links each to its change page.
            assert bool(rows) == model._default_manager.exists(), url
            changes.extend(rows[:1])
    assert len(changes) >= 17
    for url in changes:
        _checked(admin_client, url)


def _names(model_admin) -> list[str]:
    """What the admin writes for a page's model and for each of its inlines."""
    opts = model_admin.model._meta
    names = [str(opts.verbose_name), str(opts.verbose_name_plural)]
    for inline in model_admin.inlines:
        instance = inline(model_admin.model, admin.site)
        names += [str(instance.verbose_name), str(instance.verbose_name_plural)]
    return names


@pytest.mark.parametrize(
    "model_admin",
    sorted(admin.site._registry.values(), key=lambda a: a.model._meta.label),
    ids=lambda a: a.model._meta.label,
)
def test_each_model_is_named_as_people_write_it(model_admin):
    for name in _names(model_admin):
        assert not ACRONYMS.search(name), name
        assert not AUTO_PLURAL.search(name) or name.endswith("stats") or name.endswith("access"), (
            name
        )
