"""Contact imports: one claimed run over a CSV/JSON source, batch by batch.

Batches are read and checked ahead of the one being written (IMPORT_READ_AHEAD_BATCHES),
so the recipient domain lookups of the next batches (RECIPIENT_DOMAIN_CHECK) run while
the current one is written; nothing of a batch read ahead is written or counted before
its turn, so a run that dies resumes after its last committed batch.
"""

import logging
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from itertools import islice
from uuid import UUID

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from outreach.contacts.data import ContactData, InvalidContactData, contact_data_clean
from outreach.contacts.import_skips import (
    IMPORT_ERRORS_KEPT,
    blocked_skip,
    no_mail_server_skip,
    shown,
    simulator_skip,
)
from outreach.contacts.services import contact_build, contact_merge_into
from outreach.contacts.sources import CsvSource, JsonSource, Row, SourceError
from outreach.contacts.suppression import suppressions_for
from outreach.domains.recipients import (
    Asked,
    RecipientDomainLookups,
    email_domain,
)
from outreach.enrollments import enroll
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact, ContactImport

logger = logging.getLogger(__name__)

# Batches read, checked and asked about (their recipient domains) ahead of the batch being
# written: enough to keep the DNS lookups in flight while a batch is written, few enough that the
# rows held stay a few batches whatever the import's size.
IMPORT_READ_AHEAD_BATCHES = 2


class _RunSuperseded(Exception):
    """Another run claimed the import (this one was presumed dead): stop without writing."""


def _source_open(contact_import: ContactImport):
    data = bytes(contact_import.source_data)
    if contact_import.source_format == ContactImport.Format.CSV:
        return CsvSource(data)
    return JsonSource(data)


def contact_import_claim(*, import_id, now: datetime | None = None) -> ContactImport | None:
    """Take the import for this run: pending, or processing with a heartbeat older than
    CONTACT_IMPORT_STALE_SECONDS (its worker died). None when another run holds it."""
    now = now or timezone.now()
    stale = now - timedelta(seconds=settings.CONTACT_IMPORT_STALE_SECONDS)
    claimed = (
        ContactImport.objects.filter(pk=import_id)
        .filter(
            Q(status=ContactImport.Status.PENDING)
            | Q(status=ContactImport.Status.PROCESSING, heartbeat_at__lt=stale)
        )
        .update(
            status=ContactImport.Status.PROCESSING,
            attempts=F("attempts") + 1,
            heartbeat_at=now,
            started_at=Coalesce("started_at", now),
        )
    )
    if not claimed:
        return None
    return ContactImport.objects.get(pk=import_id)


def _import_finish(contact_import: ContactImport, *, status: str, reason: str = "") -> bool:
    now = timezone.now()
    return bool(
        ContactImport.objects.filter(pk=contact_import.pk, attempts=contact_import.attempts).update(
            status=status,
            failure_reason=reason,
            completed_at=now,
            heartbeat_at=now,
            source_data=b"",
        )
    )


def contact_import_run(
    *, import_id, progress: Callable[[int, int], None] | None = None
) -> ContactImport | None:
    """Process an import in batches. Each batch (its contacts, its enrollments and the
    progress counters) commits in one transaction, so a run that dies resumes exactly
    after the last committed batch when the import is re-driven."""
    contact_import = contact_import_claim(import_id=import_id)
    if contact_import is None:
        return None
    if contact_import.attempts > settings.CONTACT_IMPORT_MAX_ATTEMPTS:
        _import_finish(
            contact_import,
            status=ContactImport.Status.FAILED,
            reason=f"Gave up after {contact_import.attempts - 1} interrupted attempts.",
        )
        return ContactImport.objects.get(pk=import_id)
    try:
        source = _source_open(contact_import)
        ContactImport.objects.filter(pk=import_id, attempts=contact_import.attempts).update(
            total_rows=source.total_rows
        )
        errors = list(contact_import.errors)
        done = contact_import.processed_rows
        rows = source.rows(skip=contact_import.processed_rows)
        lookups = RecipientDomainLookups() if settings.RECIPIENT_DOMAIN_CHECK else None
        try:
            for batch in _batches_ahead(rows, lookups):
                done += _import_batch(contact_import, batch, errors, lookups)
                if progress:
                    progress(done, source.total_rows)
        finally:
            if lookups is not None:
                lookups.close()
    except SourceError as exc:
        _import_finish(contact_import, status=ContactImport.Status.FAILED, reason=str(exc))
    except _RunSuperseded:
        logger.info("contact import %s: run %s superseded", import_id, contact_import.attempts)
        return None
    else:
        _import_finish(contact_import, status=ContactImport.Status.COMPLETED)
    return ContactImport.objects.get(pk=import_id)


@dataclass
class _Batch:
    """A batch read and merged, its errors its own until its turn to be written."""

    rows: list[Row]
    merged: dict[str, ContactData]
    duplicates: int
    skipped: int
    errors: list[dict] = field(default_factory=list)
    # Its recipient domains, asked about when it was read (RECIPIENT_DOMAIN_CHECK).
    asked: Asked | None = None
    # The rows of each address (the blocklist names the rows it skips).
    rows_of: dict[str, list[Row]] = field(default_factory=dict)


def _batch_read(rows: list[Row], lookups: RecipientDomainLookups | None) -> _Batch:
    errors: list[dict] = []
    rows_of: dict[str, list[Row]] = {}
    merged, duplicates, skipped = _rows_merge(rows, errors, rows_of)
    batch = _Batch(rows, merged, duplicates, skipped, errors, rows_of=rows_of)
    if lookups is not None and merged:
        batch.asked = lookups.ask({email_domain(key) for key in merged})
    return batch


def _batches_ahead(rows: Iterator[Row], lookups: RecipientDomainLookups | None) -> Iterator[_Batch]:
    """The batches of `rows` in order, each read (and its domains asked about) up to
    IMPORT_READ_AHEAD_BATCHES batches before it is yielded. (A source is walked whole
    when it is opened, so a structural SourceError fails the import before any batch.)"""
    batch_size = settings.CONTACT_IMPORT_BATCH_SIZE
    ahead: deque[_Batch] = deque()
    exhausted = False
    while True:
        while not exhausted and len(ahead) <= IMPORT_READ_AHEAD_BATCHES:
            chunk = list(islice(rows, batch_size))
            exhausted = len(chunk) < batch_size
            if chunk:
                ahead.append(_batch_read(chunk, lookups))
        if not ahead:
            return
        yield ahead.popleft()


def _import_batch(
    contact_import: ContactImport,
    batch: _Batch,
    errors: list[dict],
    lookups: RecipientDomainLookups | None,
) -> int:
    """Upsert one batch: returns its row count. `errors` is extended in place with the
    batch's errors (up to IMPORT_ERRORS_KEPT in all)."""
    rows, merged = batch.rows, batch.merged
    duplicates, skipped = batch.duplicates, batch.skipped
    blocked_rows = blocked_skip(contact_import.account_id, merged, batch.rows_of, batch.errors)
    skipped += blocked_rows
    duplicates -= blocked_rows - len(batch.rows_of)
    simulator_keys = len(merged)
    simulator_rows = simulator_skip(contact_import.campaign_id, merged, rows, batch.errors)
    skipped += simulator_rows
    duplicates -= simulator_rows - (simulator_keys - len(merged))
    if lookups is not None and batch.asked is not None:
        bad = lookups.without_mail_server(batch.asked)
        no_mail_rows, no_mail_duplicates = no_mail_server_skip(merged, rows, bad, batch.errors)
        skipped += no_mail_rows
        duplicates -= no_mail_duplicates
    errors.extend(batch.errors[: max(0, IMPORT_ERRORS_KEPT - len(errors))])
    with transaction.atomic():
        now = timezone.now()
        contacts, created = _contacts_upsert(contact_import.account_id, merged, now)
        if contact_import.campaign_id and contacts:
            _contacts_enroll(contact_import, contacts)
        _progress_record(
            contact_import,
            rows=len(rows),
            created=created,
            updated=duplicates + len(contacts) - created,
            skipped=skipped,
            errors=errors,
            now=now,
        )
    return len(rows)


def _rows_merge(
    rows: list[Row], errors: list[dict], rows_of: dict[str, list[Row]] | None = None
) -> tuple[dict[str, ContactData], int, int]:
    """The batch's valid rows by address, a duplicate within the file merged into its
    first row; with the count of duplicates and of skipped (invalid) rows, whose errors
    are added to `errors` (up to IMPORT_ERRORS_KEPT). `rows_of` collects each address's
    rows."""
    duplicates = skipped = 0
    merged: dict[str, ContactData] = {}
    for row in rows:
        try:
            if "__invalid__" in row.raw:
                raise InvalidContactData("row", row.raw["__invalid__"])
            data = contact_data_clean(row.raw)
        except InvalidContactData as exc:
            skipped += 1
            if len(errors) < IMPORT_ERRORS_KEPT:
                email = row.raw.get("email")
                errors.append(
                    {
                        "row": row.number,
                        # What the row said, shown back; never a NUL (jsonb refuses it).
                        "email": shown(email) if isinstance(email, str) else "",
                        "message": shown(f"{exc.field_name}: {exc.message}"),
                    }
                )
            continue
        if rows_of is not None:
            rows_of.setdefault(data.key, []).append(row)
        if data.key in merged:
            merged[data.key].absorb(data)
            duplicates += 1  # a duplicate within the file updates the contact of its first row
        else:
            merged[data.key] = data
    return merged, duplicates, skipped


def _contacts_upsert(
    account_id: UUID, merged: dict[str, ContactData], now: datetime
) -> tuple[list[Contact], int]:
    """Create or update the account's contacts of the merged rows in one statement:
    returns them, and how many were created."""
    existing = {
        contact.email_lower: contact
        for contact in Contact.objects.filter(account_id=account_id, email_lower__in=list(merged))
    }
    # New addresses that were suppressed before (their contact deleted since).
    suppressed = suppressions_for(
        account_id=account_id, keys=[key for key in merged if key not in existing]
    )
    created = 0
    contacts = []
    for key, data in merged.items():
        contact = existing.get(key)
        if contact is None:
            created += 1
            contact = contact_build(
                account_id=account_id, data=data, suppression=suppressed.get(key)
            )
        else:
            contact_merge_into(contact, data)
            contact.account_id = account_id
        contact.updated_at = now
        contacts.append(contact)
    if contacts:
        Contact.objects.bulk_create(
            contacts,
            update_conflicts=True,
            unique_fields=["account", "email_lower"],
            update_fields=[
                "first_name",
                "last_name",
                "company",
                "fields",
                "timezone",
                "updated_at",
            ],
        )
    return contacts, created


def _contacts_enroll(contact_import: ContactImport, contacts: list[Contact]) -> None:
    """Enroll the imported contacts (but the suppressed) in the import's campaign."""
    if _campaign_hold(contact_import.campaign_id):
        enroll(
            campaign_id=contact_import.campaign_id,
            contact_ids=[c.pk for c in contacts if not c.is_suppressed],
        )
    else:
        # Deleted during the import (the row's campaign is now NULL): the contacts are
        # still imported, there is nothing left to enroll them in.
        contact_import.campaign_id = None


def _progress_record(
    contact_import: ContactImport, *, rows, created, updated, skipped, errors, now
) -> None:
    """Add the batch to the import's counts; raises _RunSuperseded if the import was
    started again since this run began (its attempts moved on)."""
    moved = ContactImport.objects.filter(
        pk=contact_import.pk, attempts=contact_import.attempts
    ).update(
        processed_rows=F("processed_rows") + rows,
        created_count=F("created_count") + created,
        updated_count=F("updated_count") + updated,
        skipped_count=F("skipped_count") + skipped,
        errors=errors,
        heartbeat_at=now,
    )
    if not moved:
        raise _RunSuperseded()


def _campaign_hold(campaign_id) -> bool:
    """Whether the campaign still exists. The row is also held (FOR KEY SHARE, as the
    enrollments' foreign keys would) until the transaction ends, so it cannot be deleted
    between this check and the enrollments' commit; concurrent imports into the campaign
    do not block each other."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {Campaign._meta.db_table} WHERE id = %s FOR KEY SHARE",  # noqa: S608
            [campaign_id],
        )
        return cursor.fetchone() is not None
