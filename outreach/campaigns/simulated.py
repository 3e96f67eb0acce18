"""Simulated campaigns and the rules that keep the simulator's addresses away from real
mailboxes (docs/sandbox.md, "Rules that keep real mail out").

A campaign is simulated when it has mailboxes and every one is a simulator. A campaign
with a real mailbox never holds an address at `simulator.test` (no real server is ever
asked to deliver one): such an address is refused when it is enrolled through the API
(422 naming `contact.email`), skipped by an import (reason `simulator_address`), and a
real mailbox is refused on `credential_ids` while the campaign holds one."""

from collections.abc import Iterable

from config.api.errors import ValidationFailed
from outreach.emails import SIMULATOR_DOMAIN, simulator_address
from outreach.models.campaigns import Campaign
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Enrollment, Message

SIMULATOR_ADDRESS_REASON = "simulator_address"

ADDRESS_REFUSED = (
    "An address at simulator.test is the mailbox simulator's: only a campaign whose "
    "mailboxes are all simulators may send to it, and this one has a real mailbox."
)
REAL_MAILBOX_REFUSED = (
    "This campaign holds addresses at simulator.test (the mailbox simulator's): a real "
    "mailbox would be asked to deliver them. Use simulator mailboxes only, or another "
    "campaign."
)

SIMULATED_CAMPAIGN_REFUSED = (
    "This campaign's sends are simulated (its contacts were dispatched through simulator "
    "mailboxes): a real mailbox would go on with threads that never left. Create another "
    "campaign for real mail."
)

_SIMULATOR = SmtpCredential.AuthMethod.SIMULATOR


def _links():
    return Campaign.credentials.through.objects


def campaign_has_real_mailbox(campaign_id) -> bool:
    """Whether any mailbox of the campaign (enabled or not) is a real one."""
    return (
        _links()
        .filter(campaign_id=campaign_id)
        .exclude(smtpcredential__auth_method=_SIMULATOR)
        .exists()
    )


def real_credential_ids(campaign_id) -> list | None:
    """The campaign's real mailboxes (enabled or not); None when it has no mailbox."""
    rows = list(
        _links()
        .filter(campaign_id=campaign_id)
        .order_by("id")
        .values_list("smtpcredential_id", "smtpcredential__auth_method")
    )
    if not rows:
        return None
    return [pk for pk, method in rows if method != _SIMULATOR]


def campaign_simulated(campaign_id) -> bool | None:
    """True when the campaign's mailboxes are all simulators, False when one is real,
    None when it has none."""
    real = real_credential_ids(campaign_id)
    return None if real is None else not real


def campaign_holds_simulator_addresses(campaign_id) -> bool:
    return Enrollment.objects.filter(
        campaign_id=campaign_id, contact__email_lower__endswith=f"@{SIMULATOR_DOMAIN}"
    ).exists()


def address_check(*, campaign_id, email: str) -> None:
    """422 on `contact.email` for a simulator address enrolled in a campaign with a real
    mailbox."""
    if simulator_address(email) and campaign_has_real_mailbox(campaign_id):
        raise ValidationFailed({"contact.email": [ADDRESS_REFUSED]})


def credentials_check(*, campaign: Campaign, credentials: Iterable[SmtpCredential]) -> None:
    """422 on `credential_ids` for a real mailbox newly given to a campaign that holds
    simulator addresses, or whose sends are simulated: its mailboxes all simulators with
    contacts dispatched (their waits may have been moved by the test clock), or a
    message of it already went through a simulator (the real mailbox would send the
    next step of a thread whose first never left)."""
    linked = set(
        _links().filter(campaign_id=campaign.pk).values_list("smtpcredential_id", flat=True)
    )
    if not any(not c.is_simulator and c.pk not in linked for c in credentials):
        return
    if campaign_holds_simulator_addresses(campaign.pk):
        raise ValidationFailed({"credential_ids": [REAL_MAILBOX_REFUSED]})
    dispatched = Enrollment.objects.filter(campaign_id=campaign.pk).exclude(
        status=Enrollment.Status.PENDING
    )
    simulated = campaign_simulated(campaign.pk) and dispatched.exists()
    if (
        simulated
        or Message.objects.filter(
            enrollment__campaign_id=campaign.pk, credential__auth_method=_SIMULATOR
        ).exists()
    ):
        raise ValidationFailed({"credential_ids": [SIMULATED_CAMPAIGN_REFUSED]})
