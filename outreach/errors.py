"""The API errors of outreach (campaigns, contacts and their imports, mailboxes,
enrollments, relay webhooks): each class is one code of the registry (config.api.errors);
OutreachConfig.ready imports this module."""

from config.api.errors import ServiceError


class InvalidRelaySignature(ServiceError):
    code = "invalid_relay_signature"
    status = 401
    message = "The relay provider event could not be verified."
    description = "`POST /inbound/relay/<credential_id>` needs the credential's relay provider and signing key, and a valid, fresh (5 minutes), unused provider signature. Nothing was recorded."


class CampaignNotFound(ServiceError):
    code = "campaign_not_found"
    status = 404
    message = "No such campaign."
    description = "The id is unknown, or belongs to another account."


class ContactNotFound(ServiceError):
    code = "contact_not_found"
    status = 404
    message = "No such contact."
    description = "The id is unknown, or belongs to another account."


class ContactImportNotFound(ServiceError):
    code = "contact_import_not_found"
    status = 404
    message = "No such contact import."
    description = "The id is unknown, or belongs to another account."


class CredentialNotFound(ServiceError):
    code = "credential_not_found"
    status = 404
    message = "No such SMTP credential."
    description = "The id is unknown, or belongs to another account."


class EnrollmentNotFound(ServiceError):
    code = "enrollment_not_found"
    status = 404
    message = "No such enrollment."
    description = "The id is unknown, or belongs to another account."


class CampaignNotDispatchable(ServiceError):
    code = "campaign_not_dispatchable"
    status = 409
    message = "The campaign cannot be dispatched."
    description = "It has no steps, or no enabled SMTP credential. `details` says which."


class CampaignNotSimulated(ServiceError):
    code = "campaign_not_simulated"
    status = 409
    message = "The campaign's mailboxes are not all simulators."
    description = "The test clock (POST /campaigns/:id/advance) moves only a campaign whose mailboxes are all simulator mailboxes (and that has at least one): it never moves a real send."


class EnrollmentNotActive(ServiceError):
    code = "enrollment_not_active"
    status = 409
    message = "The enrollment has already ended."
    description = "Only a pending, scheduled or sent enrollment can be stopped. `details.status` is the status it ended with."


class OAuthNotConfigured(ServiceError):
    code = "oauth_not_configured"
    status = 422
    message = "The service has no OAuth client for this mailbox provider."
    description = "Connecting a Google or Microsoft mailbox with `POST /smtp_credentials/oauth` needs the operator to set the provider's OAuth client id and secret (`GOOGLE_OAUTH_CLIENT_ID`, `MICROSOFT_OAUTH_CLIENT_ID`, ...). `details.provider` names the provider."


class ReplyNotFound(ServiceError):
    code = "reply_not_found"
    status = 404
    message = "No such reply."
    description = "The id is unknown, or belongs to another account."


class CredentialUnavailable(ServiceError):
    code = "credential_unavailable"
    status = 409
    message = "The mailbox that received this reply cannot send."
    description = "`POST /replies/:id/respond` answers from the mailbox the reply arrived in. That mailbox was deleted, is disabled (by hand, or for its bounce rate), or is an OAuth mailbox whose `oauth_status` is `reauthorization_required` (connect it again with `POST /smtp_credentials/oauth`, signing in as that address). `details.reason` says which: `deleted`, `disabled` or `reauthorization_required`. Nothing was sent or recorded; enable or reconnect the mailbox and try again."


class ContactSuppressed(ServiceError):
    code = "contact_suppressed"
    status = 409
    message = "The contact has unsubscribed or bounced: no email may be sent to them."
    description = "`POST /replies/:id/respond` refuses to answer a contact who unsubscribed (by link, one-click, a complaint, or a reply asking to be removed) or whose address bounced, even after they replied: no email of this service may reach them again. `details.reason` is `unsubscribed` or `bounced`. Nothing was sent or recorded."


# --- deliverability: the blocklist (docs/deliverability.md) ---


class BlocklistEntryNotFound(ServiceError):
    code = "blocklist_entry_not_found"
    status = 404
    message = "No such blocklist entry."
    description = "The id is unknown, or belongs to another account."


class ContactBlocked(ServiceError):
    code = "contact_blocked"
    status = 422
    message = "This address is on the account's blocklist; it is never sent to."
    description = "`POST /outreaches` for an address the account's blocklist names (the address, or its domain or a parent domain), or `POST /replies/:id/respond` when it names the address the reply came from or its contact's. `details.entry` is the entry that blocks it; nothing was sent or written. Delete the entry (`DELETE /blocklist/:id`) to reach the address again."


# --- the sandbox (docs/sandbox.md) ---


class CredentialNotSimulated(ServiceError):
    code = "credential_not_simulated"
    status = 409
    message = "This mailbox is not a simulator."
    description = "`POST /smtp_credentials/:id/inbound` takes messages into simulator mailboxes only (`auth_method` `simulator`, made with `POST /smtp_credentials/simulator`): a real mailbox's mail comes from its own server, through its IMAP polling. Nothing was queued."


class ApprovalNotFound(ServiceError):
    code = "approval_not_found"
    status = 404
    message = "No such approval."
    description = "The id is unknown, or belongs to another account."


class ApprovalNotPending(ServiceError):
    code = "approval_not_pending"
    status = 409
    message = "The approval is not pending: it was decided already, or expired."
    description = (
        "Only a `pending` approval can be approved or rejected; nothing was sent. `details`: "
        "`status` (its status now: `approved`, `rejected`, `failed` or `expired`). An "
        "approval past its `expires_at` is expired even before beat marks it so."
    )
