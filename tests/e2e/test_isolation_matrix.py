"""Account isolation on every authenticated endpoint, present and future.

The matrix is built from the URL resolver: every route whose view is scoped to an
account and takes an id is called, with every method it serves, by another
account. Each answer must be the 404 of a nonexistent id, byte for byte, and the
owner's row must be unchanged. A new endpoint over a model this file does not know
fails the test until its owner-side object is added to OWNED below.
"""

import re
import uuid

import pytest
from django.forms.models import model_to_dict
from django.urls import URLPattern, URLResolver, get_resolver

from accounts.models import ApiKey
from accounts.services import api_key_create
from outreach.approvals.services import approval_request
from outreach.models.approvals import Approval
from outreach.models.blocklist import BlocklistEntry
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport
from outreach.models.conversations import Reply
from outreach.models.mailboxes import SmtpCredential
from tests.conversations.reply_rows import reply_for
from tests.intake.factories import sent_enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory, CredentialFactory
from tests.webhooks.factories import WebhookFactory
from webhooks.models import Webhook

pytestmark = pytest.mark.django_db

# How to make an object owned by `account`, per model served by a scoped view.
OWNED = {
    ApiKey: lambda account: api_key_create(account=account, label="owned").api_key,
    Webhook: lambda account: WebhookFactory(account=account),
    SmtpCredential: lambda account: CredentialFactory(account=account),
    Campaign: lambda account: CampaignFactory(account=account),
    Contact: lambda account: ContactFactory(account=account),
    ContactImport: lambda account: ContactImport.objects.create(
        account=account, source_format=ContactImport.Format.JSON
    ),
    Reply: lambda account: reply_for(sent_enrollment(account=account)),
    BlocklistEntry: lambda account: BlocklistEntry.objects.create(
        account=account, value="owned.example", kind=BlocklistEntry.Kind.DOMAIN
    ),
    Approval: lambda account: _pending_approval(account),
}


def _pending_approval(account) -> Approval:
    """A drafter's held dispatch of one of the account's campaigns."""
    drafter = api_key_create(account=account, label="drafter", role="drafter").api_key
    campaign = CampaignFactory(account=account)
    return approval_request(api_key=drafter, action="dispatch", campaign_id=campaign.pk)


BODIES = {"post": {}, "patch": {"name": "changed", "label": "changed"}, "put": {}}


def _routes(patterns, prefix=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            yield from _routes(pattern.url_patterns, prefix + str(pattern.pattern))
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), pattern


def scoped_id_routes():
    """(path template, method, view class) for every id route of a scoped view: a
    viewset's actions, and a scoped view's own methods (its id named by
    lookup_url_kwarg)."""
    found = []
    for route, pattern in _routes(get_resolver().url_patterns):
        view = getattr(pattern.callback, "cls", None)
        if view is None or not hasattr(view, "not_found_error"):
            continue
        actions = getattr(pattern.callback, "actions", None)
        if actions:
            lookup = "pk"
        else:
            lookup = view.lookup_url_kwarg or "pk"
            served = ("get", "post", "put", "patch", "delete")
            actions = {m: m for m in served if hasattr(view, m)}
        if lookup not in pattern.pattern.regex.groupindex:
            continue
        for method in actions:
            found.append((route, method, view))
    return found


def _path(route: str, pk: str) -> str:
    """A concrete path for a route template (Django path() or DRF router regex)."""
    path = route.replace("<uuid:pk>", pk).replace("<str:pk>", pk).replace("(?P<pk>[^/.]+)", pk)
    path = path.replace("<str:reply_id>", pk)
    # A nested id (an enrollment of the campaign): any id, the parent is what is probed.
    path = re.sub(r"\(\?P<\w+>[^)]*\)", str(NESTED_ID), path)
    return "/" + path.strip("^$")


NESTED_ID = uuid.uuid4()


ROUTES = scoped_id_routes()


def test_the_matrix_covers_every_scoped_resource():
    models = {view.queryset.model for _, _, view in ROUTES}
    assert models, "no scoped id routes found: the resolver walk is broken"
    unknown = models - set(OWNED)
    assert not unknown, (
        f"add an owner-side factory to OWNED for {sorted(m.__name__ for m in unknown)}"
    )


@pytest.mark.parametrize(
    ("route", "method", "view"), ROUTES, ids=[f"{m.upper()} {r}" for r, m, _ in ROUTES]
)
def test_another_accounts_id_is_a_nonexistent_id(route, method, view, account, other_client):
    owned = OWNED[view.queryset.model](account)
    before = model_to_dict(type(owned).objects.get(pk=owned.pk))
    call = getattr(other_client, method)
    body = BODIES.get(method)

    foreign = (
        call(_path(route, str(owned.pk)), body, format="json")
        if body is not None
        else call(_path(route, str(owned.pk)))
    )
    missing = (
        call(_path(route, str(uuid.uuid4())), body, format="json")
        if body is not None
        else call(_path(route, str(uuid.uuid4())))
    )

    assert foreign.status_code == 404, foreign.content
    assert foreign.json()["code"] == view.not_found_error.code
    assert foreign.content == missing.content
    after = model_to_dict(type(owned).objects.get(pk=owned.pk))
    assert after == before
