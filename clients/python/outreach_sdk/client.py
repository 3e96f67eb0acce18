"""`Client`: one method per endpoint of the API, grouped by resource.

    client = Client(api_key="ak_live_...", base_url="https://outreach.example.com")
    campaign = client.campaigns.create(name="Q4", steps=[...], credential_ids=[...])
    for contact in client.contacts.list():      # follows every page
        ...

Lists return iterators that fetch the next page when the previous one is used up.
Updates take the fields to change as keyword arguments and send them as given
(`client.webhooks.update(webhook_id, disabled_at=None)` re-enables a webhook).
"""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, date, datetime
from pathlib import Path
from typing import IO, Any, TypeVar

from outreach_sdk import errors, models
from outreach_sdk._transport import DEFAULT_BASE_URL, Transport
from outreach_sdk.approvals import Approval, Approvals, sent_or_held
from outreach_sdk.audit import AuditEvents

M = TypeVar("M", bound=models.Model)

# A keyword argument that was not given (None is a value: `label=None` clears a label).
_UNSET: Any = object()

# The most entries `POST /blocklist` takes in one call; Blocklist.add_many sends more in
# calls of this many.
BLOCKLIST_ADD_MAX = 10_000


def _flag(value: bool | None) -> str | None:
    return None if value is None else ("true" if value else "false")


def _timestamp(value: datetime | str | None) -> str | None:
    """A query parameter's time: an aware datetime in UTC (`...Z`); a naive one is taken
    as UTC; a string is sent as given."""
    if not isinstance(value, datetime):
        return value
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value.isoformat() + "Z"


def _batched(values: Iterable[str], size: int) -> Iterator[list[str]]:
    """`values` in lists of at most `size` (itertools.batched, which 3.11 lacks)."""
    iterator = iter(values)
    while chunk := list(itertools.islice(iterator, size)):
        yield chunk


def _given(**values: Any) -> dict[str, Any]:
    """The keyword arguments that were given (not None), as a request body."""
    return {key: value for key, value in values.items() if value is not None}


def _dispatch_body(contact_ids: list[str] | None, all_pending: bool) -> dict[str, Any]:
    body: dict[str, Any] = {"all_pending": True} if all_pending else {}
    if contact_ids is not None:
        body["contact_ids"] = contact_ids
    return body


class _Resource:
    def __init__(self, transport: Transport):
        self._t = transport

    def _one(self, model: type[M], method: str, path: str, **kwargs) -> M:
        return model.from_api(self._t.json(method, path, **kwargs))

    def _each(self, model: type[M], path: str, **params) -> Iterator[M]:
        for page in self._t.pages(path, params):
            for item in page:
                yield model.from_api(item)


class ApiKeys(_Resource):
    def list(self, *, limit: int | None = None) -> Iterator[models.ApiKey]:
        return self._each(models.ApiKey, "/api_keys", limit=limit)

    def create(
        self,
        *,
        label: str,
        client_kind: str = "direct",
        role: str | None = None,
        daily_send_limit: int | None = None,
        expires_at: datetime | str | None = None,
        idempotency_key: str | None = None,
    ) -> models.ApiKey:
        """The new key; `.plaintext` is shown only here. `role`: `admin` (the default),
        `sender`, `drafter` (its sends wait for an approval) or `reader`;
        `daily_send_limit`: contacts per UTC day; `expires_at`: when it stops working."""
        body = {
            "label": label,
            "client_kind": client_kind,
            **_given(
                role=role, daily_send_limit=daily_send_limit, expires_at=_timestamp(expires_at)
            ),
        }
        return self._one(
            models.ApiKey,
            "POST",
            "/api_keys",
            json_body=body,
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def revoke(self, key_id: str) -> None:
        self._t.json("DELETE", f"/api_keys/{key_id}")


class EmailVerification(_Resource):
    """The proof of the account's signup address (a link emailed at signup)."""

    def retrieve(self) -> models.EmailVerification:
        return self._one(models.EmailVerification, "GET", "/signup/verification")

    def send(self) -> models.EmailVerification:
        """Email a new link (nothing when the address is proven already); 5 an hour."""
        return self._one(models.EmailVerification, "POST", "/signup/verification")


class Plans(_Resource):
    def list(self) -> Iterator[models.Plan]:
        return self._each(models.Plan, "/plans")


class Billing(_Resource):
    def subscription(self) -> models.Subscription:
        return self._one(models.Subscription, "GET", "/billing/subscription")

    def usage(self) -> models.Usage:
        return self._one(models.Usage, "GET", "/billing/usage")

    def checkout(self, *, plan_slug: str, idempotency_key: str | None = None) -> models.SessionUrl:
        return self._one(
            models.SessionUrl,
            "POST",
            "/billing/checkout",
            json_body={"plan_slug": plan_slug},
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def portal(self, *, idempotency_key: str | None = None) -> models.SessionUrl:
        return self._one(
            models.SessionUrl,
            "POST",
            "/billing/portal",
            idempotent=True,
            idempotency_key=idempotency_key,
        )


class Webhooks(_Resource):
    def list(self) -> Iterator[models.Webhook]:
        return self._each(models.Webhook, "/webhooks")

    def create(
        self,
        *,
        url: str,
        event_filters: list[str] | None = None,
        idempotency_key: str | None = None,
    ) -> models.Webhook:
        """The new webhook; `.secret` is shown only here and by rotate_secret."""
        return self._one(
            models.Webhook,
            "POST",
            "/webhooks",
            json_body={"webhook": _given(url=url, event_filters=event_filters)},
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def retrieve(self, webhook_id: str) -> models.Webhook:
        return self._one(models.Webhook, "GET", f"/webhooks/{webhook_id}")

    def update(self, webhook_id: str, **changes: Any) -> models.Webhook:
        """`url`, `event_filters`, `disabled_at` (None re-enables)."""
        return self._one(
            models.Webhook, "PATCH", f"/webhooks/{webhook_id}", json_body={"webhook": changes}
        )

    def delete(self, webhook_id: str) -> None:
        self._t.json("DELETE", f"/webhooks/{webhook_id}")

    def rotate_secret(
        self, webhook_id: str, *, idempotency_key: str | None = None
    ) -> models.WebhookSecret:
        return self._one(
            models.WebhookSecret,
            "POST",
            f"/webhooks/{webhook_id}/rotate_secret",
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def deliveries(self, webhook_id: str, *, limit: int = 100) -> list[models.WebhookDelivery]:
        """The most recent delivery attempts, newest first (at most 1000)."""
        rows = self._t.json("GET", f"/webhooks/{webhook_id}/deliveries", params={"limit": limit})
        return [models.WebhookDelivery.from_api(row) for row in rows]

    def event_types(self) -> list[models.WebhookEventType]:
        """Every event type, its description and the JSON Schema of its `data`."""
        rows = self._t.json("GET", "/webhook_event_types")
        return [models.WebhookEventType.from_api(row) for row in rows]

    def delivery(self, webhook_id: str, delivery_id: str) -> models.WebhookDelivery:
        """One delivery attempt (a pending test delivery's outcome, once made)."""
        return self._one(
            models.WebhookDelivery, "GET", f"/webhooks/{webhook_id}/deliveries/{delivery_id}"
        )

    def test(
        self, webhook_id: str, *, type: str, wait: float = 30.0, poll_interval: float = 0.25
    ) -> models.WebhookDelivery:
        """Send an example event of `type` to the webhook. The service queues it (202,
        `state` "pending") and a worker makes it; this waits up to `wait` seconds for the
        outcome (`state` "succeeded" or "failed", `status_code`, `error`, `duration_ms`),
        polling the attempt. `wait=0`: return the pending attempt at once."""
        attempt = self._one(
            models.WebhookDelivery, "POST", f"/webhooks/{webhook_id}/test", json_body={"type": type}
        )
        deadline = time.monotonic() + wait
        while attempt.state == "pending" and time.monotonic() < deadline:
            time.sleep(poll_interval)
            attempt = self.delivery(webhook_id, attempt.id)
        return attempt

    def redeliver(self, webhook_id: str, delivery_id: str) -> models.Redelivery:
        """Deliver the event of one delivery (an attempt row) again, same envelope id."""
        return self._one(
            models.Redelivery,
            "POST",
            f"/webhooks/{webhook_id}/deliveries/{delivery_id}/redeliver",
        )

    def replay(
        self, webhook_id: str, *, since: datetime | str, idempotency_key: str | None = None
    ) -> models.Replay:
        """Deliver again every delivery that ended failed since `since` (an aware
        datetime or an ISO 8601 string); `.has_more`: call again for the rest."""
        when = since.isoformat() if isinstance(since, datetime) else since
        return self._one(
            models.Replay,
            "POST",
            f"/webhooks/{webhook_id}/replay",
            json_body={"since": when},
            idempotent=True,
            idempotency_key=idempotency_key,
        )


class Mailboxes(_Resource):
    """SMTP credentials: the mailboxes campaigns send from."""

    def list(self) -> Iterator[models.Mailbox]:
        return self._each(models.Mailbox, "/smtp_credentials")

    def create(self, *, from_email: str, **fields: Any) -> models.Mailbox:
        """Password mailboxes: smtp_host, smtp_username, smtp_password, ... (see the API).
        The answer's `.verification` is the login check run at creation."""
        return self._one(
            models.Mailbox,
            "POST",
            "/smtp_credentials",
            json_body={"from_email": from_email, **fields},
        )

    def start_oauth(
        self,
        *,
        provider: str,
        daily_limit: int | None = None,
        min_interval_seconds: int | None = None,
        max_interval_seconds: int | None = None,
        from_name: str | None = None,
    ) -> models.OAuthStart:
        """Start connecting a Google or Microsoft mailbox: open `.authorization_url` in the
        mailbox owner's browser. It is the service's page naming your account; its button
        leads on to the provider's consent page, and the flow must finish in that browser."""
        body = _given(
            provider=provider,
            daily_limit=daily_limit,
            min_interval_seconds=min_interval_seconds,
            max_interval_seconds=max_interval_seconds,
            from_name=from_name,
        )
        return self._one(models.OAuthStart, "POST", "/smtp_credentials/oauth", json_body=body)

    def create_simulator(
        self,
        *,
        from_email: str,
        from_name: str | None = None,
        daily_limit: int | None = None,
        min_interval_seconds: int | None = None,
        max_interval_seconds: int | None = None,
    ) -> models.Mailbox:
        """A simulator mailbox (`auth_method` `simulator`): it sends like any mailbox in
        campaigns but never connects anywhere; what happens to each message is what its
        recipient at simulator.test asks for (`ada+reply@simulator.test`: a reply, ...).
        See docs/sandbox.md."""
        body = _given(
            from_email=from_email,
            from_name=from_name,
            daily_limit=daily_limit,
            min_interval_seconds=min_interval_seconds,
            max_interval_seconds=max_interval_seconds,
        )
        return self._one(models.Mailbox, "POST", "/smtp_credentials/simulator", json_body=body)

    def inbound(
        self, mailbox_id: str, raw: str | bytes, *, idempotency_key: str | None = None
    ) -> models.InboundMessage:
        """Hand a whole RFC 5322 message (a reply you saved, a bounce report) to a
        simulator mailbox, as if its IMAP poll had found it; the intake takes it within
        SIMULATOR_DELAY_SECONDS (see replies.list and your webhooks). `bytes` are read as
        UTF-8. A real mailbox: CredentialNotSimulated (409)."""
        text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        return self._one(
            models.InboundMessage,
            "POST",
            f"/smtp_credentials/{mailbox_id}/inbound",
            json_body={"raw": text},
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def retrieve(self, mailbox_id: str) -> models.Mailbox:
        return self._one(models.Mailbox, "GET", f"/smtp_credentials/{mailbox_id}")

    def update(self, mailbox_id: str, **changes: Any) -> models.Mailbox:
        return self._one(
            models.Mailbox, "PATCH", f"/smtp_credentials/{mailbox_id}", json_body=changes
        )

    def resume(self, mailbox_id: str) -> models.Mailbox:
        """Resume a mailbox the complaint guard paused (`paused_reason` complaint_rate)."""
        return self.update(mailbox_id, paused_at=None)

    def delete(self, mailbox_id: str) -> None:
        self._t.json("DELETE", f"/smtp_credentials/{mailbox_id}")

    def verify(self, mailbox_id: str) -> models.MailboxVerification:
        """Log in to the SMTP (and IMAP) server now; sends nothing, changes nothing."""
        return self._one(
            models.MailboxVerification, "POST", f"/smtp_credentials/{mailbox_id}/verify"
        )

    def domain_check(self, mailbox_id: str) -> models.DomainCheck:
        """The last check of the mailbox's From domain (SPF, DKIM, DMARC, MX) with its
        findings; `status` `pending` before the first. Beat checks every mailbox daily."""
        return self._one(models.DomainCheck, "GET", f"/smtp_credentials/{mailbox_id}/domain_check")

    def check_domain(
        self, mailbox_id: str, *, dkim_selectors: list[str] | None = None
    ) -> models.DomainCheck:
        """Check the mailbox's From domain in DNS now and return the new result.
        `dkim_selectors` (at most 10) are looked up besides Google's and Microsoft's usual
        ones and kept for the next checks; omitted, the ones named before stay."""
        return self._one(
            models.DomainCheck,
            "POST",
            f"/smtp_credentials/{mailbox_id}/domain_check",
            json_body=_given(dkim_selectors=dkim_selectors),
        )


class Campaigns(_Resource):
    def list(self, *, limit: int | None = None) -> Iterator[models.Campaign]:
        return self._each(models.Campaign, "/campaigns", limit=limit)

    def create(
        self,
        *,
        name: str,
        steps: list[dict[str, Any]] | None = None,
        credential_ids: list[str] | None = None,
        idempotency_key: str | None = None,
        **settings: Any,
    ) -> models.Campaign:
        """`steps`: email steps and branches (outreach_sdk.sequences builds them).
        `settings`: timezone, send_window, track_opens, track_clicks, stop_on_reply,
        require_authenticated_domain, max_per_recipient_domain_per_day, on_reply,
        on_complete, ... (see the API)."""
        body = {**_given(name=name, steps=steps, credential_ids=credential_ids), **settings}
        return self._one(
            models.Campaign,
            "POST",
            "/campaigns",
            json_body=body,
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def retrieve(self, campaign_id: str) -> models.Campaign:
        return self._one(models.Campaign, "GET", f"/campaigns/{campaign_id}")

    def update(self, campaign_id: str, **changes: Any) -> models.Campaign:
        """The fields given change (`track_clicks=True`, `max_per_recipient_domain_per_day=None`
        for the account's default, ...); the others stay."""
        return self._one(models.Campaign, "PATCH", f"/campaigns/{campaign_id}", json_body=changes)

    def delete(self, campaign_id: str) -> None:
        self._t.json("DELETE", f"/campaigns/{campaign_id}")

    def steps_preview(self, campaign_id: str, steps: list[dict[str, Any]]) -> models.StepsPreview:
        """What `update(campaign_id, steps=steps)` would do to the enrollments on their way,
        writing nothing: the same validation_failed as the update for invalid steps."""
        return self._one(
            models.StepsPreview,
            "POST",
            f"/campaigns/{campaign_id}/steps/preview",
            json_body={"steps": steps},
        )

    def dispatch_preview(
        self,
        campaign_id: str,
        *,
        contact_ids: list[str] | None = None,
        all_pending: bool = False,
    ) -> models.DispatchPreview:
        """What `dispatch` with the same arguments would do now, writing nothing: each
        contact's first send time from the service's planner, and the refusal the
        dispatch would answer (`refusal`), or None. The same validation_failed as the
        dispatch for a bad request."""
        return self._one(
            models.DispatchPreview,
            "POST",
            f"/campaigns/{campaign_id}/dispatch/preview",
            json_body=_dispatch_body(contact_ids, all_pending),
        )

    def dispatch(
        self,
        campaign_id: str,
        *,
        contact_ids: list[str] | None = None,
        all_pending: bool = False,
    ) -> models.DispatchResult | Approval:
        """Schedule step 1 for the named pending enrollments, or for all of them. With a
        drafter key: an Approval, nothing sent."""
        body = _dispatch_body(contact_ids, all_pending)
        answer = self._t.json("POST", f"/campaigns/{campaign_id}/dispatch", json_body=body)
        return sent_or_held(models.DispatchResult, answer)

    def advance(
        self, campaign_id: str, minutes: int, *, idempotency_key: str | None = None
    ) -> models.ClockAdvance:
        """The test clock: every wait of the campaign's enrollments (next sends, branch
        deadlines, out-of-office returns, the mailboxes' pace, retries) moves `minutes`
        (1 to 527,040) earlier, as if the time had passed. Only for a campaign whose
        mailboxes are all simulators: otherwise CampaignNotSimulated (409)."""
        return self._one(
            models.ClockAdvance,
            "POST",
            f"/campaigns/{campaign_id}/advance",
            json_body={"minutes": minutes},
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def pause(self, campaign_id: str) -> models.Campaign:
        return self._one(models.Campaign, "POST", f"/campaigns/{campaign_id}/pause")

    def resume(self, campaign_id: str) -> models.Campaign:
        return self._one(models.Campaign, "POST", f"/campaigns/{campaign_id}/resume")

    def enrollments(
        self, campaign_id: str, *, status: str | None = None, limit: int | None = None
    ) -> Iterator[models.Enrollment]:
        return self._each(
            models.Enrollment, f"/campaigns/{campaign_id}/enrollments", status=status, limit=limit
        )

    def stop_enrollment(self, campaign_id: str, enrollment_id: str) -> models.Enrollment:
        """End one active enrollment by hand (status `stopped`)."""
        return self._one(
            models.Enrollment,
            "POST",
            f"/campaigns/{campaign_id}/enrollments/{enrollment_id}/stop",
        )

    def sending_status(self, campaign_id: str) -> models.SendingStatus:
        return self._one(models.SendingStatus, "GET", f"/campaigns/{campaign_id}/sending_status")

    def stats(self, campaign_id: str) -> models.CampaignStats:
        return self._one(models.CampaignStats, "GET", f"/campaigns/{campaign_id}/stats")

    def thread(self, campaign_id: str, enrollment_id: str) -> list[models.ThreadEntry]:
        """One enrollment's conversation, oldest first: the steps as sent, the contact's
        replies and the responses to them."""
        entries = self._t.json(
            "GET", f"/campaigns/{campaign_id}/enrollments/{enrollment_id}/thread"
        )
        return [models.ThreadEntry.from_api(entry) for entry in entries]


class Contacts(_Resource):
    def list(
        self,
        *,
        email: str | None = None,
        unsubscribed: bool | None = None,
        bounced: bool | None = None,
        limit: int | None = None,
    ) -> Iterator[models.Contact]:
        return self._each(
            models.Contact,
            "/contacts",
            email=email,
            unsubscribed=_flag(unsubscribed),
            bounced=_flag(bounced),
            limit=limit,
        )

    def create(self, *, email: str, **fields: Any) -> models.Contact:
        """`fields`: first_name, last_name, company, timezone, fields (custom values)."""
        return self._one(models.Contact, "POST", "/contacts", json_body={"email": email, **fields})

    def retrieve(self, contact_id: str) -> models.Contact:
        return self._one(models.Contact, "GET", f"/contacts/{contact_id}")

    def update(self, contact_id: str, **changes: Any) -> models.Contact:
        return self._one(models.Contact, "PATCH", f"/contacts/{contact_id}", json_body=changes)

    def delete(self, contact_id: str) -> None:
        self._t.json("DELETE", f"/contacts/{contact_id}")


class ContactImports(_Resource):
    def create(
        self,
        *,
        contacts: list[dict[str, Any]],
        campaign_id: str | None = None,
        idempotency_key: str | None = None,
    ) -> models.ContactImport:
        """Import contacts given as objects; with campaign_id, enroll them (pending)."""
        return self._one(
            models.ContactImport,
            "POST",
            "/contact_imports",
            json_body=_given(contacts=contacts, campaign_id=campaign_id),
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def upload_csv(
        self,
        file: str | os.PathLike | bytes | IO[bytes],
        *,
        campaign_id: str | None = None,
        filename: str | None = None,
        idempotency_key: str | None = None,
    ) -> models.ContactImport:
        """Import a CSV (a path, its bytes, or a binary file object) with a header row
        naming `email`; with campaign_id, enroll the contacts (pending)."""
        if isinstance(file, str | os.PathLike):
            path = Path(file)
            content: bytes | IO[bytes] = path.read_bytes()
            filename = filename or path.name
        else:
            content = file
        upload = {"file": (filename or "contacts.csv", content, "text/csv")}
        return self._one(
            models.ContactImport,
            "POST",
            "/contact_imports",
            files=upload,
            data=_given(campaign_id=campaign_id),
            idempotent=True,
            idempotency_key=idempotency_key,
        )

    def retrieve(self, import_id: str) -> models.ContactImport:
        return self._one(models.ContactImport, "GET", f"/contact_imports/{import_id}")

    def list(self, *, limit: int | None = None) -> Iterator[models.ContactImport]:
        return self._each(models.ContactImport, "/contact_imports", limit=limit)


class Outreaches(_Resource):
    def create(
        self,
        *,
        campaign_id: str,
        contact: dict[str, Any],
        idempotency_key: str | None = None,
    ) -> models.Enrollment | Approval:
        """Upsert the contact, enroll it and dispatch that one enrollment at once. With a
        drafter key: an Approval, nothing sent."""
        answer = self._t.json(
            "POST",
            "/outreaches",
            json_body={"campaign_id": campaign_id, "contact": contact},
            idempotent=True,
            idempotency_key=idempotency_key,
        )
        return sent_or_held(models.Enrollment, answer)


class Replies(_Resource):
    """What contacts wrote back: replies, auto-replies and out-of-office notices."""

    def list(
        self,
        *,
        campaign_id: str | None = None,
        credential_id: str | None = None,
        enrollment_id: str | None = None,
        label: str | None = None,
        read: bool | None = None,
        received_after: datetime | str | None = None,
        limit: int | None = None,
    ) -> Iterator[models.Reply]:
        """Newest first, every page; each filter given narrows the list."""
        return self._each(
            models.Reply,
            "/replies",
            campaign_id=campaign_id,
            credential_id=credential_id,
            enrollment_id=enrollment_id,
            label=label,
            read=_flag(read),
            received_after=_timestamp(received_after),
            limit=limit,
        )

    def retrieve(self, reply_id: str) -> models.Reply:
        return self._one(models.Reply, "GET", f"/replies/{reply_id}")

    get = retrieve

    def update(
        self, reply_id: str, *, read: bool = _UNSET, label: str | None = _UNSET
    ) -> models.Reply:
        """Mark read or unread, and set the label (`label=None` clears it); only what is
        given changes. A label set here is `manual`."""
        body = {
            name: value
            for name, value in {"read": read, "label": label}.items()
            if value is not _UNSET
        }
        return self._one(models.Reply, "PATCH", f"/replies/{reply_id}", json_body=body)

    def respond_preview(
        self, reply_id: str, body_text: str, body_html: str | None = None
    ) -> models.ResponsePreview:
        """What `respond` with the same bodies would send, writing nothing: the subject
        and headers as the service makes them, and the refusal `respond` would answer
        (`refusal`), or None."""
        return self._one(
            models.ResponsePreview,
            "POST",
            f"/replies/{reply_id}/respond/preview",
            json_body=_given(body_text=body_text, body_html=body_html),
        )

    def respond(
        self,
        reply_id: str,
        body_text: str,
        body_html: str | None = None,
        *,
        idempotency_key: str | None = None,
    ) -> models.ReplyResponse | Approval:
        """Answer a reply at once, in its thread, from the mailbox that received it
        (`Re:` subject, In-Reply-To and References chained). Sends an email: retried
        with the same Idempotency-Key, so it never goes out twice. With a drafter key: an
        Approval, nothing sent."""
        answer = self._t.json(
            "POST",
            f"/replies/{reply_id}/respond",
            json_body=_given(body_text=body_text, body_html=body_html),
            idempotent=True,
            idempotency_key=idempotency_key,
        )
        return sent_or_held(models.ReplyResponse, answer)


class Blocklist(_Resource):
    """Addresses and domains (subdomains included) the account never sends to: skipped at
    import and enroll, and a running sequence stops before its next step."""

    def list(
        self, *, kind: str | None = None, value: str | None = None, limit: int | None = None
    ) -> Iterator[models.BlocklistEntry]:
        """Newest first, every page. `kind`: `email` or `domain`; `value`: the entry for that
        address or domain (any case or form)."""
        return self._each(models.BlocklistEntry, "/blocklist", kind=kind, value=value, limit=limit)

    def add(self, value: str, *, reason: str | None = None) -> models.BlocklistEntry:
        """Block one address or domain; the entry (the one already there when it was on the
        list). A value that is neither raises ValidationFailed (nothing written); the
        service answered it in `invalid`, so the error's `status` is None."""
        result = self.add_many([value], reason=reason)
        if result.invalid:
            message = result.invalid[0]["message"]
            raise errors.ValidationFailed(
                message, code="validation_failed", details={"fields": {"value": [message]}}
            )
        entry = next(self.list(value=value, limit=1), None)
        if entry is None:  # deleted between the two calls
            raise errors.BlocklistEntryNotFound(
                "The entry was deleted as it was added.", code="blocklist_entry_not_found"
            )
        return entry

    def add_many(
        self, values: Iterable[str], *, reason: str | None = None
    ) -> models.BlocklistAddResult:
        """Block many addresses and domains: sent BLOCKLIST_ADD_MAX (10,000) a call, the
        counts summed. Invalid values are listed in `invalid` and the others added. Adding
        an entry twice counts it as `existing`, so a call that failed half way can be made
        again whole. `reason` (at most 200 characters) is kept on each entry added."""
        total = models.BlocklistAddResult(raw={"added": 0, "existing": 0, "invalid": []})
        for chunk in _batched(values, BLOCKLIST_ADD_MAX):
            result = self._one(
                models.BlocklistAddResult,
                "POST",
                "/blocklist",
                json_body=_given(entries=chunk, reason=reason),
            )
            total.added += result.added
            total.existing += result.existing
            total.invalid.extend(result.invalid)
        total.raw = {"added": total.added, "existing": total.existing, "invalid": total.invalid}
        return total

    def delete(self, entry_id: str) -> None:
        """Unblock: the address or domain can be reached again. Enrollments the entry
        stopped stay stopped."""
        self._t.json("DELETE", f"/blocklist/{entry_id}")

    def export_csv(self) -> bytes:
        """Every entry as CSV (`value,kind,reason,created_at`, newest first)."""
        return b"".join(self.stream_csv())

    def stream_csv(self, *, chunk_size: int = 65536) -> Iterator[bytes]:
        """The CSV export in chunks as it arrives: for a list too long to hold at once
        (`for chunk in client.blocklist.stream_csv(): out.write(chunk)`)."""
        response = self._t.request("GET", "/blocklist.csv", stream=True)
        try:
            yield from response.iter_content(chunk_size=chunk_size)
        finally:
            response.close()


class SendingDefaults(_Resource):
    """The account's defaults for its campaigns."""

    def retrieve(self) -> models.SendingDefaults:
        return self._one(models.SendingDefaults, "GET", "/sending_defaults")

    get = retrieve

    def update(
        self, *, max_per_recipient_domain_per_day: int | None = _UNSET
    ) -> models.SendingDefaults:
        """`max_per_recipient_domain_per_day`: at most that many sends a UTC day to one
        recipient domain, for every campaign whose own cap is None; None removes the cap.
        Only what is given changes."""
        body = (
            {}
            if max_per_recipient_domain_per_day is _UNSET
            else {"max_per_recipient_domain_per_day": max_per_recipient_domain_per_day}
        )
        return self._one(models.SendingDefaults, "PATCH", "/sending_defaults", json_body=body)


class TrackingDomain(_Resource):
    """The host of the account's open pixels and click links (a CNAME to the service)."""

    def retrieve(self) -> models.TrackingDomain:
        return self._one(models.TrackingDomain, "GET", "/tracking_domain")

    get = retrieve

    def set(self, domain: str) -> models.TrackingDomain:
        """Name the account's tracking domain and check its CNAME and TXT record at once
        (`status` `verified`, `failed` or `pending`); setting the same domain again checks
        it again. Another account's verified domain, or one another account claimed
        while this account's TXT record is not published, raises ValidationFailed."""
        return self._one(
            models.TrackingDomain, "PUT", "/tracking_domain", json_body={"domain": domain}
        )

    def remove(self) -> models.TrackingDomain:
        """Back to the service's host for pixels and links."""
        return self._one(
            models.TrackingDomain, "PUT", "/tracking_domain", json_body={"domain": None}
        )


class Analytics(_Resource):
    def get(
        self,
        *,
        from_date: date | str | None = None,
        to_date: date | str | None = None,
        interval: str | None = None,
        timezone: str | None = None,
        campaign_id: str | None = None,
        credential_id: str | None = None,
        step_key: str | None = None,
    ) -> models.Analytics:
        """Counters over time (`GET /analytics`): from `from_date` to `to_date` (local
        dates in `timezone`, an IANA name, default UTC; default the 30 days to today, at
        most 365 days apart), per `interval` (`day`, `week`, `month`), for the account or
        one campaign (and one of its steps, `step_key`) or one mailbox."""
        params = {
            "from": from_date.isoformat() if isinstance(from_date, date) else from_date,
            "to": to_date.isoformat() if isinstance(to_date, date) else to_date,
            "interval": interval,
            "timezone": timezone,
            "campaign_id": campaign_id,
            "credential_id": credential_id,
            "step_key": step_key,
        }
        return self._one(models.Analytics, "GET", "/analytics", params=params)


class Client:
    """The API of one account, authenticated with one of its API keys.

    `api_key` and `base_url` default to OUTREACH_API_KEY and OUTREACH_BASE_URL.
    `timeout`: seconds per HTTP attempt (a number, or `(connect, read)`).
    `max_retries`: retries per call after the first attempt; `max_retry_wait`: the longest
    wait the client accepts between two attempts (a longer Retry-After raises at once).
    """

    def __init__(
        self,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        timeout: float | tuple[float, float] = 30.0,
        max_retries: int = 3,
        max_retry_wait: float = 60.0,
        client_name: str | None = None,
    ):
        self._transport = Transport(
            api_key=api_key or os.environ.get("OUTREACH_API_KEY"),
            base_url=base_url or os.environ.get("OUTREACH_BASE_URL") or DEFAULT_BASE_URL,
            timeout=timeout,
            max_retries=max_retries,
            max_retry_wait=max_retry_wait,
            client_name=client_name,
        )
        self.api_keys = ApiKeys(self._transport)
        self.email_verification = EmailVerification(self._transport)
        self.plans = Plans(self._transport)
        self.billing = Billing(self._transport)
        self.webhooks = Webhooks(self._transport)
        self.mailboxes = Mailboxes(self._transport)
        self.campaigns = Campaigns(self._transport)
        self.contacts = Contacts(self._transport)
        self.contact_imports = ContactImports(self._transport)
        self.outreaches = Outreaches(self._transport)
        self.replies = Replies(self._transport)
        self.blocklist = Blocklist(self._transport)
        self.sending_defaults = SendingDefaults(self._transport)
        self.tracking_domain = TrackingDomain(self._transport)
        self.approvals = Approvals(self._transport)
        self.audit_events = AuditEvents(self._transport)
        self.analytics = Analytics(self._transport)

    @property
    def key_prefix(self) -> str | None:
        """The prefix (first 12 characters) of the client's API key, as GET /api_keys
        lists it; never the key itself."""
        api_key = self._transport.api_key
        return api_key[:12] if api_key else None

    def signup(self, *, email: str, name: str = "") -> models.Signup:
        """Create an account (no key needed); `.api_key.plaintext` is its first key."""
        body = self._transport.json("POST", "/signup", json_body={"email": email, "name": name})
        return models.Signup.from_api(body)

    def close(self) -> None:
        self._transport.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()
