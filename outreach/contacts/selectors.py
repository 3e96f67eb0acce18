"""Contact selectors."""

from collections.abc import Iterable
from uuid import UUID

from accounts.models import Account
from outreach.models.contacts import Contact


def contacts_owned(*, account: Account, contact_ids: Iterable[UUID]) -> set[UUID]:
    return set(
        Contact.objects.filter(account=account, pk__in=list(contact_ids)).values_list(
            "pk", flat=True
        )
    )
