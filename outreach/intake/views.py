"""Public, unauthenticated endpoints (docs/intake.md): the open pixel, the click
redirect (docs/deliverability.md), the unsubscribe page, the relay providers' event webhooks, and the pages of connecting an
OAuth mailbox (docs/outreach.md).

The pixel and the unsubscribe page are for mail clients and people, not API
clients: they answer a GIF and HTML pages. The relay webhook is an API endpoint
(JSON, the error envelope).
"""

import logging

from django.conf import settings
from django.http import HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import csrf_exempt
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.response import Response
from rest_framework.views import APIView

from config.api.errors import InvalidJson
from config.api.handlers import methods_allowed
from outreach.campaigns.clicks import click_token_read
from outreach.domains.tracking import tracking_host_serves
from outreach.errors import InvalidRelaySignature
from outreach.intake.clicks import enrollment_mark_clicked
from outreach.intake.relay import RelayMalformed, RelayUnverified, relay_webhook_receive
from outreach.intake.selectors import unsubscribe_target
from outreach.intake.services import contact_unsubscribe, enrollment_mark_opened
from outreach.mailboxes import oauth
from outreach.sending import tokens

logger = logging.getLogger(__name__)

# The smallest transparent 1x1 GIF (43 bytes).
PIXEL_GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff!\xf9\x04\x01\x00\x00\x00\x00"
    b",\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


@methods_allowed("GET", "HEAD")
def open_pixel(request, token: str):
    """GET /t/o/<token>.gif: always the same GIF; the first load of a valid token
    records the open. Cost of a repeat or a bad token: no query, or one read and one
    UPDATE that matches nothing (the message's first open), and one read on a tracking
    domain (its token must be of the domain's account, else 404)."""
    named = tokens.token_names(purpose=tokens.OPEN, token=token)
    enrollment_id = named.enrollment_id if named is not None else None
    if enrollment_id is not None and not tracking_host_serves(request, enrollment_id):
        # Another account's host, or one the token was never sent on: nothing here.
        return HttpResponse(status=404)
    # HEAD is what link scanners and proxies probe with: it answers, never records.
    if enrollment_id is not None and request.method == "GET":
        try:
            enrollment_mark_opened(enrollment_id=enrollment_id, step=named.step if named else None)
        except Exception:
            # The image must load whatever happens; the open is lost, not the email's look.
            logger.exception("open pixel: could not record the open of %s", enrollment_id)
    response = HttpResponse(PIXEL_GIF, content_type="image/gif")
    response["Cache-Control"] = "no-store, no-cache, must-revalidate, max-age=0"
    response["Pragma"] = "no-cache"
    response["Content-Length"] = str(len(PIXEL_GIF))
    return response


@never_cache
@methods_allowed("GET", "HEAD")
def click_redirect(request, token: str):
    """GET /t/c/<token>: a tracked link (docs/deliverability.md). A redirect (302) to the
    URL the token carries, and only to it; the first GET of an enrollment's links records
    its click. A tampered token, or one asked for on a host that is neither the service's
    nor its account's verified tracking domain: a 404 page, nowhere to go."""
    target = click_token_read(token)
    if target is None or not tracking_host_serves(request, target.enrollment_id):
        # A tampered token, or one asked for on a host its account does not own.
        return render(request, "outreach/click_invalid.html", status=404)
    # HEAD is what link scanners and proxies probe with: it answers, never records.
    if request.method == "GET":
        try:
            enrollment_mark_clicked(target=target)
        except Exception:
            # The reader must reach the page whatever happens; the click is lost, not the link.
            logger.exception("click: could not record the click of %s", target.enrollment_id)
    response = HttpResponseRedirect(target.url)
    # The target site learns nothing of the tracking link (its token names the contact).
    response["Referrer-Policy"] = "no-referrer"
    return response


# The token in the URL is the credential: a mail client's RFC 8058 one-click POST
# carries no cookie and no CSRF token, and a forged cross-site POST could only do
# what the link's holder can already do (unsubscribe that one contact, idempotently).
@csrf_exempt
@never_cache
@methods_allowed("GET", "HEAD", "POST")
def unsubscribe(request, token: str):
    """GET: the confirmation page with its button. POST (the button, or the mail
    client's one-click `List-Unsubscribe=One-Click`): unsubscribe, then the
    confirmation page, whatever became of the link's enrollment or campaign. A bad token,
    or one whose contact was deleted: 404 page."""
    named = tokens.token_names(purpose=tokens.UNSUBSCRIBE, token=token)
    target = unsubscribe_target(named) if named is not None else None
    if target is None:
        return render(request, "outreach/unsubscribe_invalid.html", status=404)
    contact = target.contact
    context = {"email": contact.email, "sender": target.sender or "this sender"}
    if request.method == "POST":
        contact_unsubscribe(contact_id=contact.pk)
        return render(request, "outreach/unsubscribe_done.html", context)
    if contact.unsubscribed_at is not None:
        return render(request, "outreach/unsubscribe_done.html", context)
    return render(request, "outreach/unsubscribe.html", {**context, "action": request.path})


_PROVIDER_LABELS = {"google": "Google", "microsoft": "Microsoft"}


@never_cache
@methods_allowed("GET", "HEAD", "POST")
def oauth_connect(request, token: str):
    """GET /oauth/connect/<token> (the `authorization_url` of POST /smtp_credentials/oauth):
    a page naming the account the mailbox would join, with one button. POST (that button,
    CSRF-checked, once): on to the provider's consent page, the flow's state kept in a
    cookie so the callback can tell the browser that pressed it."""
    try:
        if request.method == "POST":
            url, state, flow = oauth.authorization_continue(token=token)
        else:
            flow = oauth.authorization_to_continue(token=token)
    except oauth.AuthorizationFailed as exc:
        return render(request, "outreach/oauth_failed.html", {"reason": str(exc)}, status=400)
    if request.method != "POST":
        context = {
            "account_email": flow.account.email,
            "account_name": flow.account.name,
            "provider": _PROVIDER_LABELS[flow.provider],
            "expires_at": flow.expires_at,
            "action": request.path,
        }
        return render(request, "outreach/oauth_connect.html", context)
    response = HttpResponseRedirect(url, status=303)
    response.set_cookie(
        oauth.browser_cookie_name(state),
        state,
        max_age=int(oauth.AUTHORIZATION_LIFETIME.total_seconds()),
        path=f"/oauth/callback/{flow.provider}",
        secure=settings.BASE_URL.startswith("https://"),
        httponly=True,
        # Lax: sent on the provider's top-level redirect back, never on a cross-site POST.
        samesite="Lax",
    )
    return response


@never_cache
@methods_allowed("GET", "HEAD")
def oauth_callback(request, provider: str):
    """GET /oauth/callback/<provider>: where Google or Microsoft send the mailbox's owner
    back after consent. Connects the mailbox (outreach.mailboxes.oauth.authorization_complete) and
    says so, naming the account it joined, or says why not; a bad, reused or expired state,
    or one that comes back to another browser than the one that left, connects nothing."""
    if request.method == "HEAD":
        # A link checker's probe must not spend the single-use state.
        return HttpResponse(content_type="text/html; charset=utf-8")
    if provider not in oauth.PROVIDERS:
        return render(
            request,
            "outreach/oauth_failed.html",
            {"reason": "This page is not a sign-in return address."},
            status=404,
        )
    params = request.GET.dict()
    cookie = oauth.browser_cookie_name(params.get("state") or "")
    try:
        connected = oauth.authorization_complete(
            provider_name=provider, params=params, browser_state=request.COOKIES.get(cookie)
        )
    except oauth.AuthorizationFailed as exc:
        logger.info("oauth callback (%s) refused: %s", provider, exc)
        return render(request, "outreach/oauth_failed.html", {"reason": str(exc)}, status=400)
    credential = connected.credential
    context = {
        "email": credential.from_email,
        "account_email": connected.account_email,
        "provider": _PROVIDER_LABELS[provider],
        "created": connected.created,
        "credential_id": credential.pk,
    }
    response = render(request, "outreach/oauth_connected.html", context)
    # Its state is spent; otherwise the cookie lapses with the flow.
    response.delete_cookie(cookie, path=f"/oauth/callback/{provider}")
    return response


class RelayWebhookView(APIView):
    """POST /inbound/relay/<credential_id>: the credential's relay provider events."""

    authentication_classes: list = []
    permission_classes = [AllowAny]
    throttle_classes: list = []

    @extend_schema(
        summary="Relay provider events (Mailgun, SendGrid)",
        description=(
            "Paste `relay_webhook_url` of the SMTP credential into the provider's event "
            "webhook settings. Mailgun: the signature in the JSON body (HMAC-SHA256 with the "
            "HTTP webhook signing key). SendGrid: the signed event webhook headers (ECDSA "
            "with the verification key). Permanent bounces become enrollment.bounced, spam "
            "complaints enrollment.unsubscribed. See docs/intake.md."
        ),
        request={"application/json": dict},
        responses={
            200: inline_serializer(
                "RelayWebhookReceived",
                {
                    "received": serializers.IntegerField(),
                    "bounced": serializers.IntegerField(),
                    "unsubscribed": serializers.IntegerField(),
                    "ignored": serializers.IntegerField(),
                },
            ),
            400: OpenApiResponse(
                description="invalid_json: verified, but not the provider's format"
            ),
            401: OpenApiResponse(description="invalid_relay_signature: nothing was recorded"),
        },
        auth=[],
    )
    def post(self, request, credential_id: str):
        # The raw body: SendGrid signs the exact bytes.
        body = request.body
        try:
            outcome = relay_webhook_receive(
                credential_id=credential_id, body=body, headers=request.headers
            )
        except RelayUnverified as exc:
            logger.info("relay webhook refused for %s: %s", credential_id, exc)
            raise InvalidRelaySignature() from exc
        except RelayMalformed as exc:
            raise InvalidJson(str(exc)) from exc
        return Response(outcome.as_json())
