"""Contact selectors."""

from collections.abc import Iterable
from uuid import UUID

from accounts.models import Account
from config.api.errors import ValidationFailed
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact


def contacts_owned(*, account: Account, contact_ids: Iterable[UUID]) -> set[UUID]:
    return set(
        Contact.objects.filter(account=account, pk__in=list(contact_ids)).values_list(
            "pk", flat=True
        )
    )


def requested_campaign(
    *, account: Account, campaign_id: UUID | None, field: str = "campaign_id"
) -> Campaign | None:
    """The account's campaign a request names by id (a contact import, an outreach): None
    when it names none, a validation error on `field` when the account has no such
    campaign."""
    if campaign_id is None:
        return None
    campaign = Campaign.objects.filter(account=account, pk=campaign_id).first()
    if campaign is None:
        raise ValidationFailed({field: ["No such campaign."]})
    return campaign
