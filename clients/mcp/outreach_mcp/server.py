"""The MCP server: the outreach API's day-to-day work as tools, over stdio or
Streamable HTTP, authenticated with one API key (OUTREACH_API_KEY, best one of
client_kind `mcp`) against OUTREACH_BASE_URL.

Agent safety is on this side of the tools: reads are annotated read-only; dispatch,
pause, delete and the blocklist's changes destructive; and every tool that leads to email (dispatch_campaign of
any size, start_outreach, respond_to_reply) answers a preview with a confirmation token
first, and sends only when called again with that token, bound to exactly what it
previewed and good once (confirmation.py).

Tool errors read as docs/clients.md shows: `<code>: <message>` (and ` details: <JSON>`),
the envelope's code of an API error or the server's own (invalid_confirmation_token).
"""

import argparse
import contextlib
import functools
import itertools
import json
import os
import sys
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from outreach_sdk import Client, OutreachError, RouteNotFound
from pydantic import ConfigDict, Field

from outreach_mcp import __version__
from outreach_mcp.approvals import KeyRole, held_answer
from outreach_mcp.confirmation import (
    Binding,
    ConfirmationError,
    Confirmations,
    confirmation_gate,
    idempotency_key,
)
from outreach_mcp.deliverability import blocklist_add_answer, domain_check_answer
from outreach_mcp.preview import dispatch_preview, outreach_preview
from outreach_mcp.respond import response_preview
from outreach_mcp.sequences import sequence_words, steps_edit_gate

MAX_LIST = 100

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)
WRITE = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=False)
UPDATE = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)
SENDS_MAIL = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)
DESTRUCTIVE = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
DISPATCH = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=True)
# Blocking stops running sequences for good; unblocking removes a protection. Neither
# sends anything, so neither needs a confirmation token (docs/clients.md).
BLOCKLIST_CHANGE = ToolAnnotations(
    read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False
)
# Asks DNS about the mailbox's domain now and stores the result.
DNS_CHECK = ToolAnnotations(
    read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=True
)

CampaignId = Annotated[str, Field(description="The campaign's id (a UUID).")]
Limit = Annotated[int, Field(ge=1, le=MAX_LIST, description="How many at most (newest first).")]
ConfirmationToken = Annotated[
    str | None,
    Field(
        description="The confirmation_token of this tool's preview, once the user agreed to "
        "it. Omit it to get the preview."
    ),
]
Steps = Annotated[
    list[dict[str, Any]],
    Field(
        description="Ordered steps: {subject, body_text, body_html?, delay_minutes}. Step 1's "
        "delay counts from dispatch, later ones from the previous step; an empty subject on a "
        "later step replies in the same thread. Variables: {{first_name}}, {{last_name}}, "
        "{{company}}, {{email}}, {{fields.<name>}}, with fallbacks like {{first_name|there}}. "
        "A sequence can react: give steps a key ([a-z0-9_], default step_<n>) and next (a key "
        'or "end"; default the following element), and add branches {key, branch: {on: '
        '"opened" | "clicked" | "opened_or_clicked", of: <email step key> | "any", '
        'within_minutes}, then: <key> | "end", else: <key> | "end"}: a branch sends nothing, '
        "waits up to within_minutes for the event, then goes to then, else to else. An edit "
        "matches elements by key."
    ),
]
OnReply = Annotated[
    list[dict[str, Any]] | None,
    Field(
        description="Follow-up rules: [{label, campaign_id, delay_minutes?}]: a reply to this "
        "campaign given `label` enrols its contact in campaign_id."
    ),
]
OnComplete = Annotated[
    dict[str, Any] | None,
    Field(
        description='{campaign_id, delay_minutes?, if?: "any" | "opened" | "clicked" | '
        '"not_opened"}: an enrollment completed without a reply enrols its contact there.'
    ),
]
ReplyId = Annotated[str, Field(description="The reply's id (a UUID), from list_replies.")]
ReplyLabel = Literal[
    "interested",
    "not_interested",
    "meeting_booked",
    "wrong_person",
    "out_of_office",
    "auto_reply",
    "unsubscribe_request",
    "other",
]
# A list shows this much of each reply's new text; get_reply shows all of it.
LIST_TEXT_CHARS = 500
MailboxId = Annotated[str, Field(description="The mailbox's id (a UUID), from list_mailboxes.")]
DomainCap = Annotated[
    int | None,
    Field(
        ge=1,
        le=100_000,
        description="At most this many sends a UTC day to the addresses of one recipient "
        "domain (e.g. acme.com), counted across the account's campaigns; consumer mail "
        "domains (gmail.com, ...) are never capped.",
    ),
]
TrackClicks = Annotated[
    bool,
    Field(
        description="Lead the links of every email through a tracked redirect, so clicks "
        "show in the stats (clicked) and on enrollments (clicked_at). Unsubscribe links are "
        "never rewritten."
    ),
]
RequireAuthenticatedDomain = Annotated[
    bool,
    Field(
        description="Hold sends from mailboxes whose From domain check has an error (SPF, "
        "DKIM, DMARC: get_sender_domain_check)."
    ),
]
SendWindow = Annotated[
    dict[str, Any] | None,
    Field(
        description='When sends may go out, in the campaign\'s time zone: {"start": "09:00", '
        '"end": "17:00", "days": [1, 2, 3, 4, 5]} (ISO weekdays). null: always.'
    ),
]


class ToolFailure(Exception):
    """A tool's own refusal, shown like an API error: `<code>: <message>`."""

    def __init__(self, code: str, message: str, details: dict | None = None):
        super().__init__(message)
        self.code, self.message, self.details = code, message, details


def error_text(code: str, message: str, details: dict | None = None) -> str:
    text = f"{code}: {message}"
    if details:
        text += f" details: {json.dumps(details, sort_keys=True)}"
    return text


def _api_errors(tool):
    """An API error (and the server's own refusals) becomes a tool error result whose
    text is exactly `<code>: <message>` (docs/clients.md): returned as an error result,
    not raised, so the MCP SDK adds no "Error executing tool" prefix."""

    @functools.wraps(tool)
    def call(*args, **kwargs):
        try:
            return tool(*args, **kwargs)
        except (OutreachError, ToolFailure) as error:
            text = error_text(error.code, error.message, error.details)
        except ConfirmationError as error:
            text = error_text(error.code, error.message)
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)

    return call


def _arguments_closed(server: MCPServer, name: str) -> None:
    """An argument the tool does not take is refused, not dropped (as the API refuses an
    unknown field), and the tool's input schema says so (`additionalProperties: false`).
    Workaround: the MCP SDK has no option for it, so the registered tool's argument
    model is swapped for a subclass that forbids extra fields (the SDK reads it live)."""
    registered = server._tool_manager.get_tool(name)  # noqa: SLF001 (see docstring)
    assert registered is not None
    base = registered.fn_metadata.arg_model
    closed = type(
        base.__name__,
        (base,),
        {"model_config": ConfigDict(extra="forbid", arbitrary_types_allowed=True)},
    )
    registered.fn_metadata.arg_model = closed
    registered.parameters["additionalProperties"] = False


def _first(items, limit: int) -> list[dict[str, Any]]:
    out = []
    for item in items:
        if len(out) >= limit:
            break
        out.append(item.raw)
    return out


def _reply_summary(reply) -> dict[str, Any]:
    """A reply in a list: everything but its bodies, and the start of its new text."""
    summary = {k: v for k, v in reply.raw.items() if k not in ("text", "new_text", "html")}
    summary["new_text"] = reply.new_text[:LIST_TEXT_CHARS]
    summary["new_text_cut"] = len(reply.new_text) > LIST_TEXT_CHARS
    return summary


def build_server(
    client: Client, confirmations: Confirmations, *, key_role: str | None = None
) -> MCPServer:
    """`key_role`: the role of the client's key when known; else read from the service
    on the first send (outreach_mcp.approvals.KeyRole)."""
    role = KeyRole(client, key_role)
    server = MCPServer(
        "outreach",
        version=__version__,
        instructions="Run email outreach campaigns of one account: mailboxes, campaigns, "
        "contacts, outreach, dispatch, enrollments, stats, analytics over time (get_analytics), "
        "usage and webhooks, and the "
        "conversations: replies, their labels and threads, and responses; and deliverability: "
        "the blocklist, the per-domain daily cap, the mailboxes' SPF, DKIM and DMARC, click "
        "tracking; sequences that react (branches on opens and clicks: describe_sequence "
        "explains one in words); and the sandbox: simulator mailboxes "
        "(create_simulator_mailbox) whose emails never leave, and a simulated campaign's test "
        "clock (advance_campaign_clock). Every tool that "
        "sends email (dispatch_campaign, start_outreach, respond_to_reply) answers a preview "
        "first: show it to the user, and call the tool again with its confirmation_token only "
        "once they agree. A token sends once, exactly what it previewed. Mailboxes send 2 to 5 "
        "minutes apart by default (their pace); get_sending_status explains a campaign that "
        "does not send. With a drafter key the sending tools ask for an approval instead (no "
        "token): a person with an admin or sender key approves it in the service; "
        "list_approvals shows them.",
    )

    def tool(annotations: ToolAnnotations, description: str):
        def register(fn):
            server.add_tool(_api_errors(fn), description=description, annotations=annotations)
            _arguments_closed(server, fn.__name__)
            return fn

        return register

    @tool(
        READ,
        "List the mailboxes (SMTP credentials) campaigns can send from, each with its "
        "provider_pauses (the recipient providers it sends nothing to until `until`, after "
        "their blocks or rate limits) and paused_at (paused by its spam complaints).",
    )
    def list_mailboxes() -> list[dict[str, Any]]:
        return _first(client.mailboxes.list(), MAX_LIST)

    @tool(READ, "List campaigns, newest first, with their status and stats.")
    def list_campaigns(limit: Limit = 20) -> list[dict[str, Any]]:
        return _first(client.campaigns.list(limit=limit), limit)

    @tool(READ, "Show one campaign: steps, mailboxes, settings, status and stats.")
    def get_campaign(campaign_id: CampaignId) -> dict[str, Any]:
        return client.campaigns.retrieve(campaign_id).raw

    @tool(WRITE, "Create a campaign (status draft; nothing is sent until a dispatch).")
    def create_campaign(
        name: Annotated[str, Field(max_length=200, description="The campaign's name.")],
        steps: Steps,
        credential_ids: Annotated[
            list[str], Field(description="Ids of the mailboxes to rotate across.")
        ],
        timezone: Annotated[str, Field(description="IANA time zone name.")] = "UTC",
        send_window: SendWindow = None,
        track_opens: bool = True,
        track_clicks: TrackClicks = False,
        stop_on_reply: bool = True,
        require_authenticated_domain: RequireAuthenticatedDomain = False,
        max_per_recipient_domain_per_day: Annotated[
            DomainCap, Field(description="null: the account's default (get_sending_defaults).")
        ] = None,
        on_reply: OnReply = None,
        on_complete: OnComplete = None,
    ) -> dict[str, Any]:
        follow_ups = {
            key: value
            for key, value in {"on_reply": on_reply, "on_complete": on_complete}.items()
            if value is not None
        }
        return client.campaigns.create(
            name=name,
            steps=steps,
            credential_ids=credential_ids,
            timezone=timezone,
            send_window=send_window,
            track_opens=track_opens,
            track_clicks=track_clicks,
            stop_on_reply=stop_on_reply,
            require_authenticated_domain=require_authenticated_domain,
            max_per_recipient_domain_per_day=max_per_recipient_domain_per_day,
            **follow_ups,
        ).raw

    @tool(
        UPDATE,
        "Change a campaign's name, steps, mailboxes or settings (only those given). An edit "
        "of the steps that would move people on their way through the sequence (those "
        "waiting at a step or branch it removes) changes nothing at first: it answers a "
        "preview of the moves with a confirmation_token; show it to the user and call again "
        "with the same arguments and the token once they agree.",
    )
    def update_campaign(
        campaign_id: CampaignId,
        name: str | None = None,
        steps: Steps | None = None,
        credential_ids: list[str] | None = None,
        timezone: str | None = None,
        send_window: Annotated[
            dict[str, Any] | None,
            Field(description='{"start", "end", "days"}; an empty object {} removes the window.'),
        ] = None,
        track_opens: bool | None = None,
        track_clicks: Annotated[TrackClicks | None, Field(description="Track clicks.")] = None,
        stop_on_reply: bool | None = None,
        require_authenticated_domain: Annotated[
            RequireAuthenticatedDomain | None, Field(description="Hold failing mailboxes.")
        ] = None,
        max_per_recipient_domain_per_day: DomainCap = None,
        use_account_domain_cap: Annotated[
            bool,
            Field(
                description="Drop the campaign's own per-domain cap: the account's default "
                "applies (get_sending_defaults)."
            ),
        ] = False,
        on_reply: OnReply = None,
        on_complete: OnComplete = None,
        confirmation_token: ConfirmationToken = None,
    ) -> dict[str, Any]:
        if max_per_recipient_domain_per_day is not None and use_account_domain_cap:
            raise ToolFailure(
                "validation_failed",
                "Give max_per_recipient_domain_per_day or use_account_domain_cap, not both.",
            )
        changes = {
            key: value
            for key, value in {
                "name": name,
                "steps": steps,
                "credential_ids": credential_ids,
                "timezone": timezone,
                "track_opens": track_opens,
                "track_clicks": track_clicks,
                "stop_on_reply": stop_on_reply,
                "require_authenticated_domain": require_authenticated_domain,
                "max_per_recipient_domain_per_day": max_per_recipient_domain_per_day,
                "on_reply": on_reply,
                "on_complete": on_complete,
            }.items()
            if value is not None
        }
        if use_account_domain_cap:
            changes["max_per_recipient_domain_per_day"] = None
        if send_window is not None:
            changes["send_window"] = send_window or None
        if steps is not None:
            answer = steps_edit_gate(
                client,
                confirmations,
                campaign_id=campaign_id,
                steps=steps,
                token=confirmation_token,
            )
            if answer is not None:
                return answer
        return client.campaigns.update(campaign_id, **changes).raw

    @tool(
        READ,
        "Explain a campaign's sequence in plain words, one sentence per step or branch "
        '(e.g. "After intro, wait up to 3 days (opened_intro): if they open intro, send '
        'pricing (1 hour later); otherwise send bump (1 day later)."), with its steps.',
    )
    def describe_sequence(campaign_id: CampaignId) -> dict[str, Any]:
        return sequence_words(client, campaign_id)

    @tool(DESTRUCTIVE, "Delete a campaign and its enrollments. This cannot be undone.")
    def delete_campaign(campaign_id: CampaignId) -> dict[str, Any]:
        client.campaigns.delete(campaign_id)
        return {"deleted": campaign_id}

    @tool(WRITE, "Add one contact (an email address, unique per account).")
    def add_contact(
        email: str,
        first_name: str = "",
        last_name: str = "",
        company: str = "",
        fields: Annotated[
            dict[str, str] | None, Field(description="Custom values for {{fields.<name>}}.")
        ] = None,
    ) -> dict[str, Any]:
        return client.contacts.create(
            email=email,
            first_name=first_name,
            last_name=last_name,
            company=company,
            fields=fields or {},
        ).raw

    @tool(
        WRITE,
        "Import contacts from CSV text (a header row naming `email`; first_name, last_name, "
        "company map to fields, other columns become custom fields). With campaign_id, every "
        "imported contact is enrolled as pending (dispatch_campaign sends to them). Existing "
        "emails are updated, never duplicated. Processed in the background: read its progress "
        "with get_contact_import.",
    )
    def import_contacts_csv(
        csv: Annotated[str, Field(description="The CSV file's text.")],
        campaign_id: CampaignId | None = None,
    ) -> dict[str, Any]:
        return client.contact_imports.upload_csv(csv.encode(), campaign_id=campaign_id).raw

    @tool(READ, "Show a contact import's status, counts and the rows it skipped.")
    def get_contact_import(import_id: str) -> dict[str, Any]:
        return client.contact_imports.retrieve(import_id).raw

    @tool(
        SENDS_MAIL,
        "Start outreach to one contact: add or update the contact, enroll it in the campaign "
        "and schedule its first email. The first call sends nothing: it answers a preview "
        "(the contact, the mailboxes, when the first email would go) with a "
        "confirmation_token; show it to the user and call again with the same arguments and "
        "the token to send. A token is good once, for 10 minutes, for exactly this contact.",
    )
    def start_outreach(
        campaign_id: CampaignId,
        email: str,
        first_name: str = "",
        last_name: str = "",
        company: str = "",
        fields: dict[str, str] | None = None,
        confirmation_token: ConfirmationToken = None,
    ) -> dict[str, Any]:
        contact = {"email": email, "first_name": first_name, "last_name": last_name}
        contact |= {"company": company, "fields": fields or {}}
        campaign = client.campaigns.retrieve(campaign_id)
        binding = Binding(
            action="start_outreach",
            target=campaign.id,
            ids=[email.strip().lower()],
            extra={"contact": contact, "steps": campaign.steps},
        )
        preview = outreach_preview(client, campaign, contact)
        if role.drafting:  # the service holds it for a person: no confirmation here
            held = client.outreaches.create(campaign_id=campaign_id, contact=contact)
            return held_answer(held, preview)
        answer = confirmation_gate(
            confirmations, binding, token=confirmation_token, preview=preview
        )
        if answer is not None:
            return answer
        assert confirmation_token is not None  # the gate passed on a token
        enrollment = client.outreaches.create(
            campaign_id=campaign_id,
            contact=contact,
            idempotency_key=idempotency_key(confirmation_token),
        )
        return {**enrollment.raw, "preview": preview}

    @tool(
        DISPATCH,
        "Send a campaign to its pending enrollments (all_pending) or to the named contacts. "
        "The first call sends nothing: it answers a preview (the exact contacts, mailboxes "
        "and their pace, each contact's first send time and any refusal as the service's "
        "dispatch preview gives them, what holds each mailbox now, the plan's remaining "
        "sends) with a confirmation_token. Show the preview to the user "
        "and call again with the same arguments and the token to send to exactly the "
        "contacts previewed. A token is good once, for 10 minutes; if the contacts changed "
        "meanwhile, the answer is a new preview and token.",
    )
    def dispatch_campaign(
        campaign_id: CampaignId,
        all_pending: bool = False,
        contact_ids: list[str] | None = None,
        confirmation_token: ConfirmationToken = None,
    ) -> dict[str, Any]:
        if all_pending == (contact_ids is not None):
            raise ToolFailure("validation_failed", "Give either all_pending: true or contact_ids.")
        campaign = client.campaigns.retrieve(campaign_id)
        preview = dispatch_preview(client, campaign, contact_ids)
        if confirmation_token is not None:
            confirmations.check(confirmation_token)  # forged, expired or spent: an error
        if not preview["contact_ids"]:
            return {
                "status": "nothing_to_dispatch",
                "message": "No pending enrollment to dispatch: nothing was sent.",
                "preview": preview,
            }
        if role.drafting:  # the service holds it for a person: no confirmation here
            held = client.campaigns.dispatch(campaign_id, contact_ids=preview["contact_ids"])
            return held_answer(held, preview)
        binding = Binding(
            action="dispatch_campaign",
            target=campaign.id,
            ids=preview["contact_ids"],
            extra={"mailboxes": sorted(m["id"] for m in preview["mailboxes"])},
        )
        answer = confirmation_gate(
            confirmations, binding, token=confirmation_token, preview=preview
        )
        if answer is not None:
            return answer
        # Exactly the confirmed contacts, even for all_pending: one enrolled since the
        # preview is not in this dispatch.
        result = client.campaigns.dispatch(campaign_id, contact_ids=preview["contact_ids"])
        return {"status": "dispatched", **result.raw, "preview": preview}

    @tool(
        READ,
        "Explain whether and when a campaign sends: per mailbox, whether it can send now and "
        "why not (paced: the mailbox waits between sends, 2 to 5 minutes by default; "
        "window_closed; daily_limit_reached; mailbox_disabled; reauthorization_required; "
        "campaign_paused; campaign_completed; nothing_due; recipient_domain_limit: the day's "
        "cap of sends to a recipient domain is reached; domain_unauthenticated: the mailbox's "
        "From domain check has errors and the campaign requires an authenticated domain; "
        "mailbox_unreachable: its last attempt could not connect or log in, with the "
        "server's words, since when and retry_at, the next try; complaint_rate: paused by "
        "its spam complaints until resumed; ramping_up: its ramp-up's limit of the day; "
        "provider_paused: paused toward one recipient provider, google, microsoft, yahoo, "
        "apple or other, after its blocks or rate limits, with the server's words, while "
        "it still sends to the others), "
        "each with the time it lifts, and the next planned sends.",
    )
    def get_sending_status(campaign_id: CampaignId) -> dict[str, Any]:
        status = client.campaigns.sending_status(campaign_id)
        return {**status.raw, "summary": status.summary}

    @tool(
        WRITE,
        "Make a simulator mailbox for trying campaigns safely: it takes part in campaigns as "
        "any mailbox (rotation, pace, daily limit, sending status) but never connects "
        "anywhere, so nothing leaves the service and nothing counts in the plan's usage. "
        "Each contact's address at simulator.test chooses what happens after a '+': "
        "ada+open@, +click, +reply, +ooo (out of office, back in 7 days), +autoreply, "
        "+remove (asks to be removed), +bounce, +softbounce, +dsn, +block, +complaint, "
        "+unknown; any other address is delivered. The outcomes arrive within seconds, "
        "as replies, events and stats, through the service's own code.",
    )
    def create_simulator_mailbox(
        from_email: Annotated[str, Field(description="The From address the emails show.")],
        from_name: str = "",
        daily_limit: Annotated[int | None, Field(ge=1, description="Sends a day.")] = None,
        min_interval_seconds: Annotated[
            int | None, Field(ge=0, description="Least seconds between two sends (pace).")
        ] = None,
        max_interval_seconds: Annotated[
            int | None, Field(ge=0, description="Most seconds between two sends (pace).")
        ] = None,
    ) -> dict[str, Any]:
        return client.mailboxes.create_simulator(
            from_email=from_email,
            from_name=from_name or None,
            daily_limit=daily_limit,
            min_interval_seconds=min_interval_seconds,
            max_interval_seconds=max_interval_seconds,
        ).raw

    @tool(
        WRITE,
        "The test clock of a simulated campaign (every mailbox a simulator): move every wait "
        "of its enrollments (next steps, branch deadlines, out-of-office returns, the "
        "mailboxes' pace, retries) this many minutes earlier, as if the time had passed, so "
        "a weeks-long sequence runs in seconds. Nothing leaves the service. A campaign with "
        "a real mailbox is refused (campaign_not_simulated).",
    )
    def advance_campaign_clock(
        campaign_id: CampaignId,
        minutes: Annotated[
            int, Field(ge=1, le=527_040, description="Minutes to move (1440 a day).")
        ],
    ) -> dict[str, Any]:
        return client.campaigns.advance(campaign_id, minutes).raw

    @tool(DESTRUCTIVE, "Pause a campaign: no email of it is sent until resume_campaign.")
    def pause_campaign(campaign_id: CampaignId) -> dict[str, Any]:
        return client.campaigns.pause(campaign_id).raw

    @tool(WRITE, "Resume a paused campaign: its scheduled emails go out again.")
    def resume_campaign(campaign_id: CampaignId) -> dict[str, Any]:
        return client.campaigns.resume(campaign_id).raw

    @tool(
        READ,
        "List a campaign's enrollments (one per contact), newest first. A bounced one has "
        "bounce_reason, bounce_type (hard: the address will never accept, the contact is "
        "suppressed; soft: it could not take this message; block: the sender was refused) "
        "and bounce_category (user_unknown, mailbox_full, blocked, ...).",
    )
    def list_enrollments(
        campaign_id: CampaignId,
        status: Annotated[
            str | None,
            Field(
                description="Only this status: pending, scheduled, sent, completed, replied, "
                "bounced, unsubscribed, failed, stopped."
            ),
        ] = None,
        limit: Limit = 50,
    ) -> list[dict[str, Any]]:
        return _first(client.campaigns.enrollments(campaign_id, status=status, limit=limit), limit)

    @tool(
        READ,
        "Read a campaign's stats: enrolled, sent, opened, clicked (with track_clicks), replied, "
        "bounced, unsubscribed, stopped; and, where the service reports them, "
        "sent/opened/clicked/replied/bounced per step and A/B variant.",
    )
    def get_campaign_stats(campaign_id: CampaignId) -> dict[str, Any]:
        campaign = client.campaigns.retrieve(campaign_id)
        result = {"campaign_id": campaign.id, "status": campaign.status, "stats": campaign.stats}
        # A service without per-variant stats (GET /campaigns/:id/stats) answers not_found.
        with contextlib.suppress(RouteNotFound):
            result["steps"] = client.campaigns.stats(campaign_id).steps
        return result

    @tool(
        READ,
        "Read counters over time: sent, opened, clicked, replied, positive_replies "
        "(interested, meeting_booked), bounced {hard, soft, block}, unsubscribed, complaints "
        "and responses, per day, week (its Monday) or month (its 1st) from from_date to "
        "to_date (local dates in timezone; default the 30 days to today, at most 365 days), "
        "every period listed, with totals; for the account, one campaign (and one step of it) "
        "or one mailbox. Simulated sends count too.",
    )
    def get_analytics(
        from_date: Annotated[str | None, Field(description="First date, YYYY-MM-DD.")] = None,
        to_date: Annotated[str | None, Field(description="Last date, YYYY-MM-DD.")] = None,
        interval: Annotated[
            Literal["day", "week", "month"], Field(description="One row per this.")
        ] = "day",
        timezone: Annotated[
            str, Field(description="IANA time zone the dates are read in, e.g. Europe/Paris.")
        ] = "UTC",
        campaign_id: CampaignId | None = None,
        step_key: Annotated[
            str | None, Field(description="One step of campaign_id (its key).")
        ] = None,
        mailbox_id: MailboxId | None = None,
    ) -> dict[str, Any]:
        return client.analytics.get(
            from_date=from_date,
            to_date=to_date,
            interval=interval,
            timezone=timezone,
            campaign_id=campaign_id,
            step_key=step_key,
            credential_id=mailbox_id,
        ).raw

    @tool(
        READ,
        "Read the account's usage: the plan's monthly send limit, this period's sends, the "
        "last 12 periods, and this period's API requests by client kind (direct, sdk, mcp).",
    )
    def get_usage() -> dict[str, Any]:
        usage = client.billing.usage()
        return {**usage.raw, "remaining_sends": usage.remaining_sends}

    @tool(READ, "List the account's webhooks (their URLs, event filters and health).")
    def list_webhooks() -> list[dict[str, Any]]:
        return _first(client.webhooks.list(), MAX_LIST)

    @tool(READ, "List a webhook's most recent delivery attempts, newest first.")
    def list_webhook_deliveries(webhook_id: str, limit: Limit = 20) -> list[dict[str, Any]]:
        return [d.raw for d in client.webhooks.deliveries(webhook_id, limit=limit)]

    @tool(
        READ,
        "List what contacts wrote back (replies, auto-replies, out-of-office notices), newest "
        "first, with each one's label, read flag and the start of its new text (the message "
        "without the quoted earlier one). Filters narrow the list; read: false gives the "
        "unread ones. get_reply shows a whole reply, get_thread its conversation.",
    )
    def list_replies(
        campaign_id: CampaignId | None = None,
        enrollment_id: Annotated[str | None, Field(description="One enrollment's.")] = None,
        credential_id: Annotated[
            str | None, Field(description="Those that arrived in this mailbox.")
        ] = None,
        label: Annotated[ReplyLabel | None, Field(description="Only this label.")] = None,
        read: Annotated[bool | None, Field(description="Only read (true) or unread.")] = None,
        received_after: Annotated[
            str | None, Field(description="Only those received after this ISO 8601 time.")
        ] = None,
        limit: Limit = 20,
    ) -> list[dict[str, Any]]:
        replies = client.replies.list(
            campaign_id=campaign_id,
            enrollment_id=enrollment_id,
            credential_id=credential_id,
            label=label,
            read=read,
            received_after=received_after,
            limit=limit,
        )
        return [_reply_summary(reply) for reply in itertools.islice(replies, limit)]

    @tool(
        READ,
        "Read one reply whole: from, to, cc, subject, received_at, text (plain), new_text "
        "(without the quoted earlier message and signature), html (sanitized), attachments "
        "(names and sizes only), label, read, and for an out-of-office notice returns_on.",
    )
    def get_reply(reply_id: ReplyId) -> dict[str, Any]:
        return client.replies.retrieve(reply_id).raw

    @tool(
        READ,
        "Read a conversation in time order: each step as sent to the contact (with the SMTP "
        "attempt that sent it), each SMTP attempt that sent nothing (a bounce, a retry, a "
        "mailbox failure, with the server's reply), each of their replies, and each "
        "response sent. Give reply_id (its enrollment's thread), or campaign_id and "
        "enrollment_id.",
    )
    def get_thread(
        reply_id: Annotated[str | None, Field(description="A reply of the conversation.")] = None,
        campaign_id: CampaignId | None = None,
        enrollment_id: Annotated[str | None, Field(description="The enrollment's id.")] = None,
    ) -> list[dict[str, Any]]:
        if reply_id is not None:
            if campaign_id is not None or enrollment_id is not None:
                raise ToolFailure(
                    "validation_failed", "Give reply_id, or campaign_id and enrollment_id."
                )
            reply = client.replies.retrieve(reply_id)
            campaign_id, enrollment_id = reply.campaign_id, reply.enrollment_id
        if campaign_id is None or enrollment_id is None:
            raise ToolFailure(
                "validation_failed", "Give reply_id, or campaign_id and enrollment_id."
            )
        return [entry.raw for entry in client.campaigns.thread(campaign_id, enrollment_id)]

    @tool(
        UPDATE,
        "Label a reply (interested, not_interested, meeting_booked, wrong_person, "
        "out_of_office, auto_reply, unsubscribe_request, other), or clear its label "
        "(clear_label: true), and/or mark it read or unread. Only what is given changes. A "
        "label changes nothing else: to stop emailing a contact, use the API's unsubscribe.",
    )
    def label_reply(
        reply_id: ReplyId,
        label: Annotated[ReplyLabel | None, Field(description="The label to set.")] = None,
        clear_label: Annotated[bool, Field(description="Remove the reply's label.")] = False,
        read: Annotated[bool | None, Field(description="Mark read (true) or unread.")] = None,
    ) -> dict[str, Any]:
        if label is not None and clear_label:
            raise ToolFailure("validation_failed", "Give label or clear_label, not both.")
        changes: dict[str, Any] = {} if read is None else {"read": read}
        if label is not None or clear_label:
            changes["label"] = label
        if not changes:
            raise ToolFailure("validation_failed", "Give label, clear_label or read.")
        return client.replies.update(reply_id, **changes).raw

    @tool(
        SENDS_MAIL,
        "Answer a reply by email, at once, in its thread, from the mailbox that received it. "
        "The first call sends nothing: it answers a preview (to, subject, the first lines of "
        "the message answered, the mailbox it goes from, the exact body, earlier answers to "
        "this reply, warnings) with a confirmation_token. Show the preview to the user; once "
        "they agree, call again with the same reply_id, body_text and body_html and the "
        "token. The token confirms that reply and that exact body only, sends once, and "
        "expires after 10 minutes; a changed body needs a new preview.",
    )
    def respond_to_reply(
        reply_id: ReplyId,
        body_text: Annotated[str, Field(min_length=1, description="The answer, plain text.")],
        body_html: Annotated[
            str | None, Field(description="The answer as HTML too (optional).")
        ] = None,
        confirmation_token: ConfirmationToken = None,
    ) -> dict[str, Any]:
        if confirmation_token is not None:
            confirmations.check(confirmation_token)  # forged, expired or spent: an error
        reply = client.replies.retrieve(reply_id)
        binding = Binding(
            action="respond_to_reply",
            target=reply.id,
            ids=[reply.contact_id],
            extra={"body_text": body_text, "body_html": body_html},
        )
        preview = response_preview(client, reply, body_text, body_html)
        if role.drafting:  # the service holds it for a person: no confirmation here
            return held_answer(client.replies.respond(reply_id, body_text, body_html), preview)
        answer = confirmation_gate(
            confirmations, binding, token=confirmation_token, preview=preview
        )
        if answer is not None:
            return answer
        assert confirmation_token is not None  # the gate passed on a token
        sent = client.replies.respond(
            reply_id, body_text, body_html, idempotency_key=idempotency_key(confirmation_token)
        )
        return {"status": "responded", "response": sent.raw}

    @tool(
        READ,
        "List approvals: sends a drafter key asked for, held until a person with an admin "
        "or sender key approves or rejects them (status pending by default; approved, "
        "rejected, expired, failed).",
    )
    def list_approvals(
        status: Literal["pending", "approved", "rejected", "expired", "failed"] = "pending",
        limit: Limit = 20,
    ) -> list[dict[str, Any]]:
        return [a.raw for a in itertools.islice(client.approvals.list(status=status), limit)]

    # --- deliverability (docs/deliverability.md) -------------------------------------------

    @tool(
        READ,
        "Show a mailbox's sender domain check (SPF, DKIM, DMARC, MX of its From domain) in "
        "plain words: each finding with its level (error, warning) and what it means. Without "
        "mailbox_id, every mailbox's. The service checks each mailbox daily; "
        "check_sender_domain checks one now.",
    )
    def get_sender_domain_check(mailbox_id: MailboxId | None = None) -> list[dict[str, Any]]:
        if mailbox_id is not None:
            box = client.mailboxes.retrieve(mailbox_id)
            return [domain_check_answer(client.mailboxes.domain_check(box.id), box.from_email)]
        return [
            domain_check_answer(client.mailboxes.domain_check(box.id), box.from_email)
            for box in itertools.islice(client.mailboxes.list(), MAX_LIST)
        ]

    @tool(
        DNS_CHECK,
        "Check a mailbox's From domain in DNS now (SPF, DKIM, DMARC, MX) and answer the "
        "findings in plain words. dkim_selectors: the DKIM selectors the mail provider uses "
        "(besides Google's and Microsoft's usual ones), kept for the daily checks. Sends "
        "nothing.",
    )
    def check_sender_domain(
        mailbox_id: MailboxId,
        dkim_selectors: Annotated[
            list[str] | None,
            Field(
                max_length=10,
                description="DKIM selectors to look up (e.g. s1 for s1._domainkey); omitted: "
                "the ones named before.",
            ),
        ] = None,
    ) -> dict[str, Any]:
        box = client.mailboxes.retrieve(mailbox_id)
        check = client.mailboxes.check_domain(box.id, dkim_selectors=dkim_selectors)
        return domain_check_answer(check, box.from_email)

    @tool(
        READ,
        "List the account's blocklist, newest first: the addresses and domains (subdomains "
        "included) it never emails, with each entry's id, kind, reason and date.",
    )
    def list_blocklist(
        kind: Annotated[
            Literal["email", "domain"] | None, Field(description="Only addresses or domains.")
        ] = None,
        value: Annotated[
            str | None,
            Field(description="Only the entry for this address or domain (any case)."),
        ] = None,
        limit: Limit = 50,
    ) -> list[dict[str, Any]]:
        return _first(client.blocklist.list(kind=kind, value=value, limit=limit), limit)

    @tool(
        BLOCKLIST_CHANGE,
        "Block addresses (ada@example.com) or whole domains (competitor.com blocks its "
        "subdomains too): one or many (up to 10,000). They are never emailed: skipped at "
        "import and enroll, refused by start_outreach, and a running sequence to them stops "
        "before its next step, for good (removing the entry later does not restart it). "
        "Sends nothing. Answers how many were added, already there, and invalid.",
    )
    def add_to_blocklist(
        entries: Annotated[
            list[str],
            Field(
                min_length=1,
                max_length=10_000,
                description='Addresses and domains, e.g. ["ada@example.com", "competitor.com"].',
            ),
        ],
        reason: Annotated[
            str | None, Field(max_length=200, description="Why, kept on each entry added.")
        ] = None,
    ) -> dict[str, Any]:
        return blocklist_add_answer(client.blocklist.add_many(entries, reason=reason))

    @tool(
        BLOCKLIST_CHANGE,
        "Remove an entry from the blocklist (by entry_id from list_blocklist, or by its "
        "value): the address or domain can be emailed again. Sequences the entry stopped "
        "stay stopped. Sends nothing.",
    )
    def remove_from_blocklist(
        entry_id: Annotated[str | None, Field(description="The entry's id.")] = None,
        value: Annotated[
            str | None, Field(description="The blocked address or domain (any case).")
        ] = None,
    ) -> dict[str, Any]:
        if (entry_id is None) == (value is None):
            raise ToolFailure("validation_failed", "Give entry_id or value.")
        removed: dict[str, Any] = {"id": entry_id}
        if value is not None:
            entry = next(client.blocklist.list(value=value, limit=1), None)
            if entry is None:
                raise ToolFailure("blocklist_entry_not_found", f"No blocklist entry for {value!r}.")
            removed = entry.raw
        client.blocklist.delete(removed["id"])
        return {
            "removed": removed,
            "note": "It can be emailed again; sequences it stopped stay stopped.",
        }

    @tool(
        READ,
        "Read the account's sending defaults: max_per_recipient_domain_per_day, the daily "
        "cap of sends to one recipient domain for every campaign without its own (null: no "
        "cap).",
    )
    def get_sending_defaults() -> dict[str, Any]:
        return client.sending_defaults.retrieve().raw

    @tool(
        UPDATE,
        "Set the account's sending defaults: max_per_recipient_domain_per_day caps the sends "
        "a UTC day to the addresses of one recipient domain (e.g. acme.com), across all "
        "campaigns whose own cap is unset; null removes the cap. Sends over the cap wait "
        "for the next day.",
    )
    def set_sending_defaults(
        max_per_recipient_domain_per_day: Annotated[
            DomainCap, Field(description="The cap; null: no cap.")
        ],
    ) -> dict[str, Any]:
        return client.sending_defaults.update(
            max_per_recipient_domain_per_day=max_per_recipient_domain_per_day
        ).raw

    # --- audit log (docs/audit.md) ---------------------------------------------------------

    @tool(
        READ,
        "List the account's audit log, newest first: who changed what (an API key by its "
        "prefix, staff, or the public for a signup), the action (e.g. campaign.update), the "
        "resource and the names of the fields changed (never their values). Filters narrow "
        "it; since: an RFC 3339 time, inclusive. An admin key's.",
    )
    def list_audit_events(
        action: Annotated[str | None, Field(description="e.g. campaign.update")] = None,
        resource_type: Annotated[str | None, Field(description="e.g. campaign")] = None,
        resource_id: str | None = None,
        api_key_id: str | None = None,
        since: Annotated[str | None, Field(description="e.g. 2026-11-28T00:00:00Z")] = None,
        limit: Limit = 20,
    ) -> list[dict[str, Any]]:
        events = client.audit_events.list(
            action=action,
            resource_type=resource_type,
            resource_id=resource_id,
            api_key_id=api_key_id,
            since=since,
            limit=limit,
        )
        return _first(events, limit)

    return server


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="outreach-mcp",
        description="MCP server for the outreach service. Reads OUTREACH_API_KEY and "
        "OUTREACH_BASE_URL (and OUTREACH_MCP_CONFIRMATION_SECRET, optional).",
    )
    parser.add_argument("--transport", choices=["stdio", "streamable-http"], default="stdio")
    parser.add_argument("--host", default="127.0.0.1", help="Streamable HTTP only.")
    parser.add_argument("--port", type=int, default=8765, help="Streamable HTTP only.")
    args = parser.parse_args(argv)
    api_key = os.environ.get("OUTREACH_API_KEY")
    if not api_key:
        sys.exit("outreach-mcp: set OUTREACH_API_KEY (a key of client_kind mcp).")
    client = Client(
        api_key=api_key,
        base_url=os.environ.get("OUTREACH_BASE_URL"),
        client_name=f"outreach-mcp/{__version__}",
    )
    server = build_server(client, Confirmations(os.environ.get("OUTREACH_MCP_CONFIRMATION_SECRET")))
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port)


if __name__ == "__main__":
    main()
