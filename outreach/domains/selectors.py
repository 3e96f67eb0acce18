"""Reads of the domain checks, for the scheduler, sending_status and the API."""

from collections.abc import Collection

from outreach.models.domains import SenderDomainCheck


def credentials_unauthenticated(*, credential_ids: Collection) -> set:
    """Those of the mailboxes whose last From domain check has an error. No query for none."""
    if not credential_ids:
        return set()
    return set(
        SenderDomainCheck.objects.filter(
            credential_id__in=list(credential_ids), status=SenderDomainCheck.Status.ERROR
        ).values_list("credential_id", flat=True)
    )
