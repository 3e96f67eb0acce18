"""Mailbox selectors."""

from collections.abc import Iterable
from uuid import UUID

from accounts.models import Account
from outreach.models.mailboxes import SmtpCredential


def credentials_owned(
    *, account: Account, credential_ids: Iterable[UUID]
) -> dict[UUID, SmtpCredential]:
    return {
        credential.pk: credential
        for credential in SmtpCredential.objects.filter(
            account=account, pk__in=list(credential_ids)
        )
    }
