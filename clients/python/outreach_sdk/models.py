"""Typed results: one dataclass per resource of the API.

`Model.from_api(data)` keeps the fields the class declares and ignores the others, so a
field the service adds later never breaks an older SDK; the whole object as received is
kept in `.raw`. Timestamps (`*_at`, and `expires_at`) become aware `datetime`s; a field
whose type is a Model (Signup.api_key) becomes that model.

No secret shows in a repr: an API key's `plaintext` and a webhook's `secret` are
`repr=False` fields (and `.raw`, which holds them too, is never in a repr), so printing
or logging a result never leaks them.
"""

from dataclasses import dataclass, field, fields
from datetime import date, datetime
from typing import Any, Self, get_type_hints

from outreach_sdk.sequences import describe


def _timestamp(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
    return value


@dataclass
class Model:
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        known = {f.name for f in fields(cls)} - {"raw"}
        hints = get_type_hints(cls)
        values = {}
        for name, value in data.items():
            if name not in known:
                continue
            hint = hints.get(name)
            if isinstance(hint, type) and issubclass(hint, Model) and isinstance(value, dict):
                value = hint.from_api(value)
            elif name.endswith("_at"):
                value = _timestamp(value)
            values[name] = value
        return cls(raw=data, **values)


@dataclass
class ApiKey(Model):
    id: str = ""
    prefix: str = ""
    label: str = ""
    client_kind: str = "direct"
    role: str = "admin"
    daily_send_limit: int | None = None
    expires_at: datetime | None = None
    status: str | None = None
    created_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    # Only in the response that created it; never in a repr.
    plaintext: str | None = field(default=None, repr=False)


@dataclass
class Signup(Model):
    account_id: str = ""
    plan_slug: str = ""
    api_key: ApiKey = field(default_factory=ApiKey)  # `.api_key.plaintext`: the first key


@dataclass
class EmailVerification(Model):
    email: str = ""
    email_verified: bool = False
    email_verified_at: datetime | None = None
    verification_required: bool = False
    verification_sent: bool | None = None  # only in the answer of send()


@dataclass
class Plan(Model):
    slug: str = ""
    name: str = ""
    tier: int = 0
    monthly_limit: int = 0
    psp_price_id: str | None = None


@dataclass
class Subscription(Model):
    plan: dict[str, Any] = field(default_factory=dict)
    current_period: dict[str, Any] = field(default_factory=dict)
    psp_subscription_id: str | None = None
    psp_customer_id: str | None = None


@dataclass
class Usage(Model):
    monthly_limit: int = 0
    current: dict[str, Any] = field(default_factory=dict)
    history: list[dict[str, Any]] = field(default_factory=list)
    by_client_kind: dict[str, int] = field(default_factory=dict)

    @property
    def remaining_sends(self) -> int:
        """Sends left in the current period before dispatches are refused (never below 0)."""
        return max(0, self.monthly_limit - int(self.current.get("sends_count", 0)))


@dataclass
class SessionUrl(Model):
    url: str = ""


@dataclass
class Webhook(Model):
    id: str = ""
    url: str = ""
    event_filters: list[str] = field(default_factory=list)
    disabled_at: datetime | None = None
    consecutive_failures: int = 0
    created_at: datetime | None = None
    # Only from create and rotate_secret; never in a repr.
    secret: str | None = field(default=None, repr=False)


@dataclass
class WebhookSecret(Model):
    id: str = ""
    secret: str = field(default="", repr=False)


@dataclass
class WebhookDelivery(Model):
    id: str = ""
    event_type: str = ""
    attempt: int = 1
    state: str = ""  # pending (a test not made yet), succeeded or failed
    status_code: int | None = None
    error: str | None = None
    delivered_at: datetime | None = None
    created_at: datetime | None = None
    duration_ms: int | None = None
    test: bool = False  # a test delivery (Webhooks.test)
    event_id: str | None = None  # the envelope id; None for a test delivery


@dataclass
class WebhookEventType(Model):
    type: str = ""
    description: str = ""
    schema: dict[str, Any] = field(default_factory=dict)  # JSON Schema of the event's data


@dataclass
class Redelivery(Model):
    event_id: str = ""
    state: str = ""


@dataclass
class Replay(Model):
    replayed: int = 0
    has_more: bool = False


@dataclass
class Mailbox(Model):
    """An SMTP credential (a mailbox the account sends from). Secrets are write-only."""

    id: str = ""
    created_at: datetime | None = None
    from_email: str = ""
    from_name: str = ""
    auth_method: str = "password"
    oauth_status: str | None = None
    smtp_host: str = ""
    smtp_port: int | None = None
    smtp_username: str = ""
    smtp_security: str = ""
    smtp_password_set: bool = False
    imap_host: str = ""
    imap_port: int | None = None
    imap_username: str = ""
    imap_security: str = ""
    imap_password_set: bool = False
    daily_limit: int = 0
    min_interval_seconds: int | None = None
    max_interval_seconds: int | None = None
    next_send_earliest_at: datetime | None = None
    relay_provider: str | None = None
    relay_signing_key_set: bool = False
    relay_webhook_url: str = ""
    disabled_at: datetime | None = None
    disabled_reason: str | None = None
    # The complaint guard's pause (paused_reason complaint_rate): Mailboxes.resume ends it.
    paused_at: datetime | None = None
    paused_reason: str | None = None
    # The circuit breaker's pauses in force: [{provider, until, reason, detail}].
    provider_pauses: list[dict[str, Any]] = field(default_factory=list)
    # {start_per_day, increase_per_day}, or None.
    ramp_up: dict[str, int] | None = None
    sent_count: int = 0
    bounced_count: int = 0
    last_error: str | None = None
    last_error_at: datetime | None = None
    imap_last_polled_at: datetime | None = None
    imap_last_error: str | None = None
    imap_last_error_at: datetime | None = None
    verification: dict[str, Any] | None = None  # only in the response that created it


@dataclass
class MailboxVerification(Model):
    smtp: dict[str, Any] = field(default_factory=dict)
    imap: dict[str, Any] | None = None


@dataclass
class OAuthStart(Model):
    authorization_url: str = ""
    expires_at: datetime | None = None


@dataclass
class Campaign(Model):
    id: str = ""
    name: str = ""
    created_at: datetime | None = None
    status: str = "draft"
    paused_reason: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    credential_ids: list[str] = field(default_factory=list)
    timezone: str = "UTC"
    send_window: dict[str, Any] | None = None
    bounce_threshold_percent: float = 5.0
    track_opens: bool = True
    track_clicks: bool = False
    stop_on_reply: bool = True
    stop_on_domain_reply: bool = False
    send_in_contact_timezone: bool = False
    unsubscribe_footer: bool = False
    require_authenticated_domain: bool = False  # hold sends from mailboxes failing the check
    max_per_recipient_domain_per_day: int | None = None  # None: the account's default
    # Follow-up campaigns: [{label, campaign_id, delay_minutes}] and {campaign_id,
    # delay_minutes, if}, passed through as the API has them.
    on_reply: list[dict[str, Any]] = field(default_factory=list)
    on_complete: dict[str, Any] | None = None
    # enrolled, sent, opened, clicked, replied, bounced, unsubscribed, ...
    stats: dict[str, int] = field(default_factory=dict)

    @property
    def steps_in_words(self) -> list[str]:
        """The sequence, one sentence per element (outreach_sdk.sequences.describe)."""
        return describe(self.steps)


@dataclass
class StepsPreview(Model):
    """What an edit of a campaign's steps would do to the enrollments on their way:
    `moves: [{from_key, to_key, enrollments}]` (`to_key` "end": they complete)."""

    moves: list[dict[str, Any]] = field(default_factory=list)

    @property
    def moved(self) -> int:
        return sum(move["enrollments"] for move in self.moves)


@dataclass
class DispatchResult(Model):
    campaign_id: str = ""
    dispatched: int = 0


@dataclass
class DispatchPreview(Model):
    """What `dispatch` with the same arguments would do now, from the service's own rules,
    nothing written: how many it would dispatch, the earliest first send, the first send
    times by time zone (`send_times: [{timezone, contacts, at}]`), the contacts one by
    one (`contacts: [{contact_id, email, timezone, first_send_at}]`, the first 1,000 by
    address; `has_more` when there are more), those the blocklist would stop
    (`blocked`), the named ones it would leave alone (`not_pending`) and `refusal`: the
    error the dispatch would answer instead (`{status, code, message, details}`), or
    None."""

    campaign_id: str = ""
    dispatched: int = 0
    first_send_at: datetime | None = None
    # A contact in the campaign's time zone (one without its own), dispatched now.
    campaign_timezone_first_send_at: datetime | None = None
    send_times: list[dict[str, Any]] = field(default_factory=list)
    contacts: list[dict[str, Any]] = field(default_factory=list)
    has_more: bool = False
    blocked: list[dict[str, Any]] = field(default_factory=list)
    not_pending: list[str] = field(default_factory=list)
    refusal: dict[str, Any] | None = None


@dataclass
class ClockAdvance(Model):
    """A test clock's move (Campaigns.advance): how many waits of the campaign moved."""

    campaign_id: str = ""
    moved: int = 0


@dataclass
class InboundMessage(Model):
    """A message handed to a simulator mailbox (Mailboxes.inbound), queued for its
    intake: its Message-ID (None without one) and size in bytes."""

    credential_id: str = ""
    message_id: str | None = None
    size: int = 0


@dataclass
class CampaignStats(Model):
    """The campaign's counts (`clicked`: enrollments with a click on a tracked link), and
    per step and A/B variant: `steps: [{position, variants: [{variant, sent, opened,
    clicked, replied, bounced}]}]`."""

    campaign_id: str = ""
    enrolled: int = 0
    sent: int = 0
    opened: int = 0
    clicked: int = 0
    replied: int = 0
    bounced: int = 0
    unsubscribed: int = 0
    stopped: int = 0
    steps: list[dict[str, Any]] = field(default_factory=list)


_Date = date  # the type of AnalyticsRow.date, a field of that name


@dataclass
class AnalyticsCounts(Model):
    """What happened in a period (GET /analytics): `bounced` is {hard, soft, block}."""

    sent: int = 0
    opened: int = 0
    clicked: int = 0
    replied: int = 0
    positive_replies: int = 0
    bounced: dict[str, int] = field(default_factory=dict)
    unsubscribed: int = 0
    complaints: int = 0
    responses: int = 0


@dataclass
class AnalyticsRow(AnalyticsCounts):
    """One period of the series: `date` is its first day (a week's Monday, a month's 1st)."""

    date: _Date | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        row = super().from_api(data)
        if isinstance(row.date, str):
            row.date = date.fromisoformat(row.date)
        return row


@dataclass
class Analytics(Model):
    """Counters over time: every period of the range, zeros included, and their totals."""

    interval: str = "day"
    timezone: str = "UTC"
    series: list[AnalyticsRow] = field(default_factory=list)
    totals: AnalyticsCounts = field(default_factory=AnalyticsCounts)

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        analytics = super().from_api(data)
        analytics.series = [AnalyticsRow.from_api(row) for row in data.get("series", [])]
        return analytics


@dataclass(repr=False)
class SendingStatus(Model):
    """A dry run of the scheduler for one campaign: which mailbox can send, and what is next.
    Its repr is the `summary`: what holds each mailbox, in words."""

    campaign_id: str = ""
    status: str = ""
    mailboxes: list[dict[str, Any]] = field(default_factory=list)
    upcoming: list[dict[str, Any]] = field(default_factory=list)

    @property
    def summary(self) -> list[str]:
        """One line per mailbox: "can send now", or each reason with the time it lifts,
        its words and, for a mailbox that cannot connect or log in (mailbox_unreachable),
        when that was recorded and when it is tried again."""
        return [_mailbox_line(box) for box in self.mailboxes]

    def __repr__(self) -> str:
        return (
            f"SendingStatus(campaign_id={self.campaign_id!r}, status={self.status!r}, "
            f"summary={self.summary!r}, upcoming={len(self.upcoming)})"
        )


def _mailbox_line(box: dict[str, Any]) -> str:
    """A mailbox paused toward some recipient providers (provider_paused) can still send
    to the others: "can send now, except: provider_paused google until ..."."""
    if box.get("can_send_now") and not box.get("reasons"):
        return f"{box.get('from_email')}: can send now."
    reasons = "; ".join(
        reason["code"]
        + (f" {reason['provider']}" if reason.get("provider") else "")
        + (f" until {reason['until']}" if reason.get("until") else "")
        + (f" ({reason['detail']})" if reason.get("detail") else "")
        + (f" since {reason['since']}" if reason.get("since") else "")
        + (f", retry at {reason['retry_at']}" if reason.get("retry_at") else "")
        for reason in box.get("reasons", [])
    )
    if box.get("can_send_now"):
        return f"{box.get('from_email')}: can send now, except: {reasons}."
    return f"{box.get('from_email')}: {reasons}."


@dataclass
class Contact(Model):
    id: str = ""
    created_at: datetime | None = None
    email: str = ""
    first_name: str = ""
    last_name: str = ""
    company: str = ""
    timezone: str | None = None
    fields: dict[str, str] = field(default_factory=dict)
    unsubscribed_at: datetime | None = None
    bounced_at: datetime | None = None


@dataclass
class ContactImport(Model):
    id: str = ""
    created_at: datetime | None = None
    completed_at: datetime | None = None
    campaign_id: str | None = None
    status: str = "pending"
    source_format: str = ""
    filename: str = ""
    total_rows: int = 0
    processed_rows: int = 0
    created_count: int = 0
    updated_count: int = 0
    skipped_count: int = 0
    errors: list[dict[str, Any]] = field(default_factory=list)
    failure_reason: str | None = None


@dataclass
class Enrollment(Model):
    id: str = ""
    campaign_id: str = ""
    contact_id: str = ""
    contact_email: str = ""
    status: str = ""
    current_step: int = 0
    # The element it sends or waits at next (None once ended), and the keys passed.
    current_key: str | None = None
    path: list[str] = field(default_factory=list)
    variant: str | None = None
    next_send_at: datetime | None = None
    sent_at: datetime | None = None
    opened_at: datetime | None = None
    clicked_at: datetime | None = None
    replied_at: datetime | None = None
    bounce_reason: str | None = None
    # What the bounce meant: `hard` (the contact is suppressed), `soft` or `block`, and
    # its category (user_unknown, mailbox_full, blocked, ...); None unless bounced.
    bounce_type: str | None = None
    bounce_category: str | None = None
    unsubscribed_at: datetime | None = None
    stopped_at: datetime | None = None
    stop_reason: str | None = None  # `blocked`: the account's blocklist names the contact
    last_error: str | None = None
    created_at: datetime | None = None


@dataclass
class Attachment(Model):
    """An attachment of a reply: its metadata only (the file itself is not kept)."""

    filename: str = ""
    content_type: str = ""
    size: int = 0  # bytes, decoded


@dataclass
class ResponsePreview(Model):
    """What `replies.respond` with the same bodies would send, nothing written: the
    recipient, the subject (the service's `Re:` rule, one line, at most 998
    characters), the thread's ids, the headers as sent (`[{name, value}]`: From, To,
    Subject, In-Reply-To, References) and `refusal`: the error `respond` would answer
    instead (`{status, code, message, details}`), or None."""

    reply_id: str = ""
    credential_id: str | None = None
    to: str = ""
    subject: str = ""
    in_reply_to: str | None = None
    references: list[str] = field(default_factory=list)
    headers: list[dict[str, str]] = field(default_factory=list)
    body_text: str = ""
    body_html: str = ""
    refusal: dict[str, Any] | None = None


@dataclass
class Reply(Model):
    """An inbound message the service matched to an enrollment: a reply, an auto-reply
    or an out-of-office notice. `text` is the plain text (an HTML-only message rendered
    as text), `new_text` the same without the quoted earlier message and signature, and
    `html` the sanitized HTML. `label` is None until the intake or someone sets one;
    `label_source` says which (`auto`, `manual`). `sender_verified` False: matched by its
    From address alone, not authenticated; it changed nothing (no reply recorded, no
    unsubscribe, no delay)."""

    id: str = ""
    enrollment_id: str = ""
    campaign_id: str = ""
    contact_id: str = ""
    credential_id: str | None = None
    from_email: str = ""
    from_name: str = ""
    to: list[str] = field(default_factory=list)
    cc: list[str] = field(default_factory=list)
    subject: str = ""
    received_at: datetime | None = None
    message_id: str = ""
    in_reply_to: str | None = None
    text: str = ""
    new_text: str = ""
    html: str = ""
    truncated: bool = False
    attachments: list[Attachment] = field(default_factory=list)
    label: str | None = None
    label_source: str | None = None
    sender_verified: bool = True
    returns_on: date | None = None  # out_of_office: the return date the notice gave
    read: bool = False
    # What the campaign's on_reply rules did: [{label, campaign_id, outcome}].
    rule_outcomes: list[dict[str, Any]] = field(default_factory=list)
    body_purged_at: datetime | None = None  # the bodies were deleted for retention
    created_at: datetime | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        reply = super().from_api(data)
        reply.attachments = [Attachment.from_api(item) for item in data.get("attachments") or []]
        if isinstance(reply.returns_on, str):
            reply.returns_on = date.fromisoformat(reply.returns_on)
        return reply


@dataclass
class ReplyResponse(Model):
    """An answer sent to a reply, from the mailbox that received it, in its thread.
    `status`: `queued`, `sent` or `failed` (then `error` says why)."""

    id: str = ""
    reply_id: str = ""
    enrollment_id: str | None = None  # in the answer of respond()
    status: str = ""
    subject: str = ""
    to: str = ""
    sent_at: datetime | None = None
    error: str | None = None
    created_at: datetime | None = None
    message_id: str | None = None  # in a thread
    text: str | None = None  # in a thread: the text as sent


@dataclass
class SendAttempt(Model):
    """One SMTP attempt of a step. `outcome`: `sent`, `bounced` (5xx), `deferred` (4xx or
    a broken connection: retried), `failed` (no retry can help) or `mailbox_failed`
    (authentication, TLS, the sender refused); `outcome_unknown` when the server's reply
    to the message never came (counted as sent)."""

    id: int = 0
    step: int = 0
    credential_id: str | None = None
    outcome: str = ""
    reply_code: int | None = None
    reply_text: str = ""
    outcome_unknown: bool = False
    started_at: datetime | None = None
    finished_at: datetime | None = None
    duration_ms: int | None = None


@dataclass
class ThreadStep(Model):
    """A step of the sequence as it was sent to the contact, with the attempt that sent
    it (None for a message sent before attempts were recorded)."""

    message_id: str = ""
    step: int = 0
    variant: str = ""
    subject: str = ""
    text: str = ""
    to: str = ""
    sent_at: datetime | None = None
    attempt: SendAttempt | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        step = super().from_api(data)
        step.attempt = SendAttempt.from_api(data["attempt"]) if data.get("attempt") else None
        return step


@dataclass
class ThreadEntry(Model):
    """One entry of an enrollment's conversation: `type` (`step`, `reply`, `response` or
    `attempt`: an SMTP attempt that sent nothing) says which of `step`, `reply`,
    `response` and `attempt` is set; `item` is that one."""

    type: str = ""
    at: datetime | None = None
    step: ThreadStep | None = None
    reply: Reply | None = None
    response: ReplyResponse | None = None
    attempt: SendAttempt | None = None

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        entry = super().from_api(data)
        entry.at = _timestamp(entry.at)
        entry.step = ThreadStep.from_api(data["step"]) if data.get("step") else None
        entry.reply = Reply.from_api(data["reply"]) if data.get("reply") else None
        entry.response = ReplyResponse.from_api(data["response"]) if data.get("response") else None
        entry.attempt = SendAttempt.from_api(data["attempt"]) if data.get("attempt") else None
        return entry

    @property
    def item(self) -> ThreadStep | Reply | ReplyResponse | SendAttempt | None:
        return self.step or self.reply or self.response or self.attempt


@dataclass
class BlocklistEntry(Model):
    """An address or a domain (its subdomains included) the account never sends to."""

    id: str = ""
    value: str = ""
    kind: str = ""  # `email` or `domain`
    created_at: datetime | None = None
    reason: str | None = None


@dataclass
class BlocklistAddResult(Model):
    """What `POST /blocklist` did: `added` new entries, `existing` ones already on the list
    (and repeats), and the `invalid` values as `{value, message}`."""

    added: int = 0
    existing: int = 0
    invalid: list[dict[str, str]] = field(default_factory=list)


@dataclass
class SendingDefaults(Model):
    """The account's defaults for its campaigns (a campaign's own value wins)."""

    max_per_recipient_domain_per_day: int | None = None  # None: no cap


@dataclass
class DomainFinding(Model):
    """One finding of a sender domain check: `code` (`spf_missing`, `dmarc_policy_none`,
    ...), `level` (`error` or `warning`) and a human `message`."""

    code: str = ""
    level: str = ""
    message: str = ""


@dataclass
class DomainCheck(Model):
    """The last check of a mailbox's From domain: SPF, DKIM, DMARC and MX. `status` is
    `pending` before the first check, else `error`, `warning` or `pass`; `records` is
    what DNS answered (`spf`, `dmarc`, `dkim_selectors`, `mx`)."""

    credential_id: str = ""
    domain: str = ""
    status: str = ""
    checked_at: datetime | None = None
    findings: list[DomainFinding] = field(default_factory=list)
    records: dict[str, Any] = field(default_factory=dict)
    dkim_selectors: list[str] = field(default_factory=list)  # the ones the account named

    @classmethod
    def from_api(cls, data: dict[str, Any]) -> Self:
        check = super().from_api(data)
        check.findings = [DomainFinding.from_api(item) for item in data.get("findings") or []]
        return check

    @property
    def errors(self) -> list[DomainFinding]:
        return [finding for finding in self.findings if finding.level == "error"]

    @property
    def warnings(self) -> list[DomainFinding]:
        return [finding for finding in self.findings if finding.level == "warning"]


@dataclass
class TrackingDomain(Model):
    """The account's tracking domain: `status` `verified` (open pixels and click links
    use it), `failed` or `pending`; `domain` and `status` are None when none is set. The
    domain must be a CNAME to `cname_target`, and carry a TXT record named `txt_name`
    whose value is `txt_value` (the proof it is this account's)."""

    domain: str | None = None
    status: str | None = None
    checked_at: datetime | None = None
    cname_target: str = ""
    txt_name: str | None = None
    txt_value: str = ""


@dataclass
class AuditActor(Model):
    """Who made a change: `type` `api_key` (`id`, `prefix`, `client_kind`), `staff`
    (`id`, `username`) or `public` (a signup)."""

    type: str = ""
    id: str | None = None
    prefix: str | None = None
    username: str | None = None
    client_kind: str | None = None


@dataclass
class AuditResource(Model):
    type: str = ""
    id: str | None = None


@dataclass
class AuditEvent(Model):
    """One request that changed the account's data; `changes` names fields, never values."""

    id: str = ""
    occurred_at: datetime | None = None
    actor: AuditActor = field(default_factory=AuditActor)
    action: str = ""
    resource: AuditResource = field(default_factory=AuditResource)
    request_id: str = ""
    idempotency_key: str | None = None
    ip: str | None = None
    changes: list[str] = field(default_factory=list)
