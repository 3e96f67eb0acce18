"""Contact imports: start one (queue its task) and re-queue the stale ones."""

from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Account
from outreach.contacts.tasks import import_contacts
from outreach.models.campaigns import Campaign
from outreach.models.contacts import ContactImport

# --- Contact imports -----------------------------------------------------------------


def contact_import_create(
    *,
    account: Account,
    source_format: str,
    data: bytes,
    campaign: Campaign | None = None,
    filename: str = "",
) -> ContactImport:
    """Store the upload and queue its processing after commit. Returns it pending."""
    contact_import = ContactImport.objects.create(
        account=account,
        campaign=campaign,
        source_format=source_format,
        source_data=data,
        filename=filename[:255],
    )
    transaction.on_commit(lambda: import_contacts.delay(str(contact_import.pk)))
    return contact_import


def contact_imports_redrive(*, now: datetime | None = None) -> list[UUID]:
    """Re-queue imports whose run died (processing, heartbeat stale) or whose task never
    reached a worker (pending for longer than the stale delay). Beat runs it."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.CONTACT_IMPORT_STALE_SECONDS)
    ids = list(
        ContactImport.objects.filter(
            Q(status=ContactImport.Status.PROCESSING, heartbeat_at__lt=stale)
            | Q(status=ContactImport.Status.PENDING, created_at__lt=stale)
        ).values_list("pk", flat=True)[:100]
    )
    for import_id in ids:
        import_contacts.delay(str(import_id))
    return ids
