"""Rows an import skips before it writes anything: addresses the account's blocklist
names (reason `blocked`), addresses whose domain cannot receive mail (reason
`domain_has_no_mail_server`) and, for a campaign with a real mailbox, the mailbox
simulator's addresses (reason `simulator_address`, docs/sandbox.md); each skipped row is
named in the import's errors
(docs/outreach.md, "Contact imports"; docs/deliverability.md)."""

from uuid import UUID

from outreach.blocklist.selectors import blocked_among
from outreach.contacts.data import ContactData
from outreach.contacts.sources import Row
from outreach.domains.recipients import REASON as NO_MAIL_SERVER
from outreach.domains.recipients import email_domain, no_mail_server_message
from outreach.emails import InvalidEmail, email_clean, simulator_address
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential

# Errors an import keeps at most (its rows beyond are counted, not named).
IMPORT_ERRORS_KEPT = 100


def shown(text: str) -> str:
    return text.replace("\x00", "\ufffd")[:500]


def no_mail_server_skip(
    merged: dict[str, ContactData], rows: list[Row], bad: set[str], errors: list[dict]
) -> tuple[int, int]:
    """Drop from `merged` the addresses of the domains in `bad`, which cannot receive
    mail (RECIPIENT_DOMAIN_CHECK, outreach.domains.recipients), before anything is
    written. Returns the rows skipped so, and how many of them were duplicates within the
    file; each skipped row gets an error with reason `domain_has_no_mail_server`."""
    if not bad:
        return 0, 0
    dropped = {key for key in merged if email_domain(key) in bad}
    if not dropped:
        return 0, 0
    for key in dropped:
        del merged[key]
    count = 0
    for row in rows:
        email = row.raw.get("email")
        # Only rows whose written domain is one of them are cleaned again, to be named.
        if not isinstance(email, str) or email_domain(email.strip()) not in bad:
            continue
        try:
            key = email_clean(email).lower()
        except InvalidEmail:
            continue
        if key not in dropped:
            continue
        count += 1
        if len(errors) < IMPORT_ERRORS_KEPT:
            errors.append(
                {
                    "row": row.number,
                    "email": shown(email),
                    "message": shown(f"email: {no_mail_server_message(email_domain(key))}"),
                    "reason": NO_MAIL_SERVER,
                }
            )
    return count, count - len(dropped)


def blocked_skip(
    account_id: UUID, merged: dict[str, ContactData], rows_of: dict[str, list[Row]], errors
) -> int:
    """Take the addresses the account's blocklist names out of `merged` (one query): their
    rows are skipped, each listed in `errors` with the reason `blocked` (up to
    IMPORT_ERRORS_KEPT). Leaves in `rows_of` the blocked addresses only; returns how many
    rows they had."""
    blocked = blocked_among(account_id=account_id, emails=merged)
    for key in list(rows_of):
        if key not in blocked:
            del rows_of[key]
    skipped = 0
    for key, entry in blocked.items():
        data = merged.pop(key)
        for row in rows_of[key]:
            skipped += 1
            if len(errors) < IMPORT_ERRORS_KEPT:
                errors.append(
                    {
                        "row": row.number,
                        "email": shown(data.email),
                        "message": f"blocked: the account's blocklist names it ({entry}).",
                        "reason": "blocked",
                    }
                )
    return skipped


SIMULATOR_ADDRESS = "simulator_address"


def simulator_skip(
    campaign_id: UUID | None, merged: dict[str, ContactData], rows: list[Row], errors
) -> int:
    """Take the mailbox simulator's addresses out of `merged` when the import enrolls in
    a campaign with a real mailbox (which must never be asked to deliver one); each of
    their rows is skipped with the reason `simulator_address`. Returns how many rows."""
    keys = [key for key in merged if simulator_address(key)]
    if not keys or campaign_id is None:
        return 0
    real = (
        Campaign.credentials.through.objects.filter(campaign_id=campaign_id)
        .exclude(smtpcredential__auth_method=SmtpCredential.AuthMethod.SIMULATOR)
        .exists()
    )
    if not real:
        return 0
    for key in keys:
        del merged[key]
    skipped = 0
    for row in rows:
        email = row.raw.get("email")
        if not isinstance(email, str) or not simulator_address(email.strip()):
            continue
        try:
            if email_clean(email).lower() not in keys:
                continue
        except InvalidEmail:
            continue
        skipped += 1
        if len(errors) < IMPORT_ERRORS_KEPT:
            errors.append(
                {
                    "row": row.number,
                    "email": shown(email),
                    "message": "email: an address at simulator.test is the mailbox simulator's; "
                    "the campaign has a real mailbox, which never sends to it.",
                    "reason": SIMULATOR_ADDRESS,
                }
            )
    return skipped
