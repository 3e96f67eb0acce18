"""Writes for the outreach resources. Views validate, then call these."""

import logging
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from uuid import UUID

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import Account
from billing.usage import plan_limit_enforce
from config.api.errors import CampaignNotDispatchable, ValidationFailed
from outreach.contact_data import ContactData, InvalidContactData, contact_data_clean
from outreach.csv_source import CsvSource, JsonSource, Row, SourceError
from outreach.enrollments import enroll, enrollment_enroll
from outreach.models import (
    Campaign,
    CampaignStep,
    Contact,
    ContactImport,
    Enrollment,
    SmtpCredential,
)
from outreach.suppression import contact_suppression_apply, suppressions_for
from outreach.windows import SendWindow, step_send_at, window_timezone

logger = logging.getLogger(__name__)

IMPORT_ERRORS_KEPT = 100


# --- SMTP credentials ------------------------------------------------------------------


_CREDENTIAL_FIELDS = {
    "from_email",
    "from_name",
    "smtp_host",
    "smtp_port",
    "smtp_username",
    "smtp_password",
    "smtp_security",
    "imap_host",
    "imap_port",
    "imap_username",
    "imap_password",
    "imap_security",
    "daily_limit",
    "min_interval_seconds",
    "max_interval_seconds",
    "relay_provider",
    "relay_signing_key",
}


def credential_create(*, account: Account, data: dict) -> SmtpCredential:
    credential = SmtpCredential(account=account)
    for name, value in data.items():
        if name in _CREDENTIAL_FIELDS:
            setattr(credential, name, value)
    credential.save()
    return credential


def credential_update(*, credential: SmtpCredential, data: dict) -> SmtpCredential:
    for name, value in data.items():
        if name in _CREDENTIAL_FIELDS:
            setattr(credential, name, value)
    if "disabled_at" in data:
        if data["disabled_at"] is None:
            # Re-enable: the reason goes with it.
            credential.disabled_at = None
            credential.disabled_reason = ""
        elif credential.disabled_at is None:
            credential.disabled_at = data["disabled_at"]
            credential.disabled_reason = SmtpCredential.DisabledReason.MANUAL
    if credential.imap_host == "":
        # Without a host there is no mailbox to poll; forget its state.
        credential.imap_uidvalidity = None
        credential.imap_last_uid = None
    # Every column but the OAuth tokens: a refresh may have replaced them since this
    # row was read (outreach.oauth writes them, under its lease).
    credential.save(
        update_fields=[
            f.name
            for f in SmtpCredential._meta.concrete_fields
            if not f.primary_key and f.name not in SmtpCredential.OAUTH_TOKEN_FIELDS
        ]
    )
    return credential


# --- Campaigns -----------------------------------------------------------------------


def _steps_replace(*, campaign: Campaign, steps: Sequence[dict]) -> None:
    """Steps are edited in place by position, so a step keeps its row (and anything the
    sending engine links to it) while its position exists."""
    existing = {step.position: step for step in campaign.steps.all()}
    for position, data in enumerate(steps, start=1):
        step = existing.get(position) or CampaignStep(campaign=campaign, position=position)
        step.subject = data.get("subject", "")
        step.body_text = data["body_text"]
        step.body_html = data.get("body_html") or ""
        step.delay_minutes = data.get("delay_minutes", 0)
        step.variants = [
            {
                "subject": variant.get("subject", ""),
                "body_text": variant["body_text"],
                "body_html": variant.get("body_html") or "",
            }
            for variant in data.get("variants") or []
        ]
        step.save()
    CampaignStep.objects.filter(campaign=campaign, position__gt=len(steps)).delete()


_CAMPAIGN_FIELDS = (
    "name",
    "timezone",
    "send_window",
    "bounce_threshold_percent",
    "track_opens",
    "stop_on_reply",
    "stop_on_domain_reply",
    "unsubscribe_footer",
    "send_in_contact_timezone",
)


@transaction.atomic
def campaign_create(*, account: Account, data: dict) -> Campaign:
    campaign = Campaign(account=account)
    for name in _CAMPAIGN_FIELDS:
        if name in data:
            setattr(campaign, name, data[name])
    campaign.save()
    if data.get("steps"):
        _steps_replace(campaign=campaign, steps=data["steps"])
    if data.get("credentials"):
        campaign.credentials.set(data["credentials"])
    return campaign


@transaction.atomic
def campaign_update(*, campaign: Campaign, data: dict) -> Campaign:
    for name in _CAMPAIGN_FIELDS:
        if name in data:
            setattr(campaign, name, data[name])
    campaign.save()
    if "steps" in data:
        _steps_replace(campaign=campaign, steps=data["steps"])
    if "credentials" in data:
        campaign.credentials.set(data["credentials"])
    return campaign


def campaign_pause(*, campaign: Campaign) -> Campaign:
    """active -> paused (manual). Pausing a paused campaign changes nothing."""
    if campaign.status == Campaign.Status.PAUSED:
        return campaign
    if campaign.status != Campaign.Status.ACTIVE:
        raise ValidationFailed(
            {"status": [f"Only an active campaign can be paused; this one is {campaign.status}."]}
        )
    updated = Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.ACTIVE).update(
        status=Campaign.Status.PAUSED,
        paused_reason=Campaign.PausedReason.MANUAL,
        paused_at=timezone.now(),
        updated_at=timezone.now(),
    )
    campaign.refresh_from_db()
    if not updated and campaign.status != Campaign.Status.PAUSED:
        # It changed state between our read and the update.
        raise ValidationFailed({"status": [f"The campaign is now {campaign.status}."]})
    return campaign


def _enabled_credential_exists(campaign: Campaign) -> bool:
    return campaign.credentials.filter(disabled_at__isnull=True).exists()


def campaign_resume(*, campaign: Campaign) -> Campaign:
    """paused -> active, when an enabled credential can carry the sends. Resuming an
    active campaign changes nothing."""
    if campaign.status == Campaign.Status.ACTIVE:
        return campaign
    if campaign.status != Campaign.Status.PAUSED:
        raise ValidationFailed(
            {"status": [f"Only a paused campaign can be resumed; this one is {campaign.status}."]}
        )
    if not _enabled_credential_exists(campaign):
        raise CampaignNotDispatchable(
            "The campaign has no enabled SMTP credential; re-enable one or add another first.",
            details={"reasons": ["no_enabled_credential"]},
        )
    Campaign.objects.filter(pk=campaign.pk, status=Campaign.Status.PAUSED).update(
        status=Campaign.Status.ACTIVE,
        paused_reason="",
        paused_at=None,
        updated_at=timezone.now(),
    )
    campaign.refresh_from_db()
    return campaign


def _dispatch_checks(campaign: Campaign) -> CampaignStep:
    """409 when the campaign cannot send, then 402 when the plan's cap is reached.
    Returns step 1."""
    reasons = []
    first_step = campaign.steps.order_by("position").first()
    if first_step is None:
        reasons.append("no_steps")
    if not _enabled_credential_exists(campaign):
        reasons.append("no_enabled_credential")
    if reasons:
        words = {"no_steps": "no steps", "no_enabled_credential": "no enabled SMTP credential"}
        raise CampaignNotDispatchable(
            f"The campaign cannot be dispatched: {' and '.join(words[r] for r in reasons)}.",
            details={"reasons": reasons},
        )
    plan_limit_enforce(account=campaign.account)
    return first_step


def _activate(campaign: Campaign, now: datetime) -> None:
    """Dispatch starts a draft campaign, and restarts a completed one. A paused campaign
    stays paused: its new enrollments wait for resume."""
    if campaign.status in (Campaign.Status.DRAFT, Campaign.Status.COMPLETED):
        Campaign.objects.filter(pk=campaign.pk).update(
            status=Campaign.Status.ACTIVE, updated_at=now
        )
        campaign.status = Campaign.Status.ACTIVE


def _first_send_at(
    campaign: Campaign, first_step: CampaignStep, now: datetime, *, contact_timezone: str = ""
) -> datetime:
    return step_send_at(
        after=now,
        delay_minutes=first_step.delay_minutes,
        timezone=window_timezone(campaign=campaign, contact_timezone=contact_timezone),
        window=SendWindow.from_json(campaign.send_window),
    )


def _not_suppressed(prefix: str = "contact__") -> Q:
    return Q(**{f"{prefix}unsubscribed_at__isnull": True, f"{prefix}bounced_at__isnull": True})


def campaign_dispatch(
    *,
    campaign: Campaign,
    contact_ids: Sequence[UUID] | None = None,
    now: datetime | None = None,
) -> int:
    """Move pending enrollments (all of them, or those of `contact_ids`) to scheduled with
    step 1's send time. One set-based UPDATE, whatever the count. Suppressed contacts'
    enrollments stay pending and are not counted. Returns the number dispatched."""
    now = now or timezone.now()
    with transaction.atomic():
        # Serialises dispatches of one campaign (and its status change).
        campaign = (
            Campaign.objects.select_for_update(no_key=True)
            .select_related("account")
            .get(pk=campaign.pk)
        )
        first_step = _dispatch_checks(campaign)
        pending = Enrollment.objects.filter(
            campaign=campaign, status=Enrollment.Status.PENDING
        ).filter(_not_suppressed())
        if contact_ids is not None:
            pending = pending.filter(contact_id__in=list(contact_ids))
        # One UPDATE per window time zone: the campaign's, or with contact time zones,
        # one per distinct zone among the contacts (a few hundred at most).
        zones = [""]
        if campaign.send_in_contact_timezone and campaign.send_window:
            zones = list(pending.order_by().values_list("contact__timezone", flat=True).distinct())
        dispatched, due_now = 0, False
        for zone in zones:
            send_at = _first_send_at(campaign, first_step, now, contact_timezone=zone)
            rows = pending.filter(contact__timezone=zone) if len(zones) > 1 else pending
            count = rows.update(
                status=Enrollment.Status.SCHEDULED,
                next_send_at=send_at,
                dispatched_at=now,
                updated_at=now,
            )
            dispatched += count
            due_now = due_now or (count and send_at <= now)
        _activate(campaign, now)
        if due_now:
            transaction.on_commit(sends_schedule_soon, robust=True)
    return dispatched


def sends_schedule_soon() -> None:
    """Run the send scheduler now rather than at its next tick (up to
    SENDING_SCHEDULE_INTERVAL_SECONDS away): a dispatch whose first step is due at once
    starts sending as soon as it commits. Never raises: the tick comes anyway."""
    if not settings.SENDING_SCHEDULE_ON_DISPATCH:
        return
    from outreach.tasks import schedule_sends

    try:
        schedule_sends.apply_async(retry=False, expires=settings.SENDING_SCHEDULE_INTERVAL_SECONDS)
    except Exception:
        logger.warning("send scheduler not rung; its next tick runs it", exc_info=True)


# --- Contacts ------------------------------------------------------------------------


def _duplicate_email() -> ValidationFailed:
    return ValidationFailed({"email": ["A contact with this email already exists."]})


def _contact_new(*, account: Account, data: ContactData) -> Contact:
    """An unsaved contact for `data`, carrying its address's suppression, if any."""
    contact = Contact(
        account=account,
        email=data.email,
        first_name=data.first_name,
        last_name=data.last_name,
        company=data.company,
        fields=data.fields,
        timezone=data.timezone,
    )
    found = suppressions_for(account_id=account.pk, keys=[data.key])
    contact_suppression_apply(contact, found.get(data.key))
    return contact


def contact_create(*, account: Account, data: ContactData) -> Contact:
    if Contact.objects.filter(account=account, email_lower=data.key).exists():
        raise _duplicate_email()
    contact = _contact_new(account=account, data=data)
    try:
        with transaction.atomic():
            contact.save(force_insert=True)
            return contact
    except IntegrityError:
        raise _duplicate_email() from None


def contact_update(*, contact: Contact, changes: dict) -> Contact:
    """PATCH semantics: the given attributes replace the stored ones (fields as a whole)."""
    if (
        "email" in changes
        and changes["email"].lower() != contact.email_lower
        and (
            Contact.objects.filter(
                account_id=contact.account_id, email_lower=changes["email"].lower()
            )
            .exclude(pk=contact.pk)
            .exists()
        )
    ):
        raise _duplicate_email()
    new_key = changes["email"].lower() if "email" in changes else None
    for name, value in changes.items():
        setattr(contact, name, value)
    if new_key is not None and new_key != contact.email_lower:
        # A new address brings its own suppression with it.
        found = suppressions_for(account_id=contact.account_id, keys=[new_key])
        contact_suppression_apply(contact, found.get(new_key))
    try:
        with transaction.atomic():
            contact.save()
    except IntegrityError:
        raise _duplicate_email() from None
    return contact


def _merge_into(contact: Contact, data: ContactData) -> None:
    for name in ("first_name", "last_name", "company", "timezone"):
        value = getattr(data, name)
        if value:
            setattr(contact, name, value)
    if data.fields:
        contact.fields = {**(contact.fields or {}), **data.fields}


def contact_upsert(*, account: Account, data: ContactData) -> tuple[Contact, bool]:
    """The contact with this email, created or merged (non-empty values win, fields merge).
    Returns (contact, created)."""
    for _ in range(2):
        contact = (
            Contact.objects.select_for_update(no_key=True)
            .filter(account=account, email_lower=data.key)
            .first()
        )
        if contact is not None:
            _merge_into(contact, data)
            contact.save()
            return contact, False
        contact = _contact_new(account=account, data=data)
        try:
            with transaction.atomic():
                contact.save(force_insert=True)
                return contact, True
        except IntegrityError:
            continue  # created concurrently: merge into it
    raise RuntimeError("contact upsert lost twice to concurrent writers")


# --- Outreaches ----------------------------------------------------------------------


def outreach_create(
    *, account: Account, campaign: Campaign, contact: ContactData, now: datetime | None = None
) -> tuple[Enrollment, bool]:
    """Upsert the contact, enroll it, dispatch that one enrollment. Returns
    (enrollment, changed): changed is False when the contact was already enrolled
    and dispatched (a no-op)."""
    now = now or timezone.now()
    with transaction.atomic():
        campaign = (
            Campaign.objects.select_for_update(no_key=True)
            .select_related("account")
            .get(pk=campaign.pk)
        )
        first_step = _dispatch_checks(campaign)
        row, _ = contact_upsert(account=account, data=contact)
        if row.is_suppressed:
            why = "unsubscribed" if row.unsubscribed_at else "bounced"
            raise ValidationFailed(
                {"contact.email": [f"This contact has {why}; it is never enrolled again."]}
            )
        enrollment, created = enrollment_enroll(campaign_id=campaign.pk, contact_id=row.pk)
        changed = created
        if enrollment.status == Enrollment.Status.PENDING:
            enrollment.status = Enrollment.Status.SCHEDULED
            enrollment.next_send_at = _first_send_at(
                campaign, first_step, now, contact_timezone=row.timezone
            )
            enrollment.dispatched_at = now
            enrollment.save(update_fields=["status", "next_send_at", "dispatched_at", "updated_at"])
            changed = True
            if enrollment.next_send_at <= now:
                transaction.on_commit(sends_schedule_soon, robust=True)
        _activate(campaign, now)
    enrollment.contact = row
    return enrollment, changed


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
    from outreach.tasks import import_contacts

    contact_import = ContactImport.objects.create(
        account=account,
        campaign=campaign,
        source_format=source_format,
        source_data=data,
        filename=filename[:255],
    )
    transaction.on_commit(lambda: import_contacts.delay(str(contact_import.pk)))
    return contact_import


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
        batch_size = settings.CONTACT_IMPORT_BATCH_SIZE
        batch: list[Row] = []
        done = contact_import.processed_rows
        for row in source.rows(skip=contact_import.processed_rows):
            batch.append(row)
            if len(batch) >= batch_size:
                done += _import_batch(contact_import, batch, errors)
                batch = []
                if progress:
                    progress(done, source.total_rows)
        if batch:
            done += _import_batch(contact_import, batch, errors)
            if progress:
                progress(done, source.total_rows)
    except SourceError as exc:
        _import_finish(contact_import, status=ContactImport.Status.FAILED, reason=str(exc))
    except _RunSuperseded:
        logger.info("contact import %s: run %s superseded", import_id, contact_import.attempts)
        return None
    else:
        _import_finish(contact_import, status=ContactImport.Status.COMPLETED)
    return ContactImport.objects.get(pk=import_id)


def _shown(text: str) -> str:
    return text.replace("\x00", "\ufffd")[:500]


def _import_batch(contact_import: ContactImport, rows: list[Row], errors: list[dict]) -> int:
    """Upsert one batch: returns its row count. `errors` is extended in place."""
    account_id = contact_import.account_id
    created = updated = skipped = 0
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
                        "email": _shown(email) if isinstance(email, str) else "",
                        "message": _shown(f"{exc.field_name}: {exc.message}"),
                    }
                )
            continue
        if data.key in merged:
            merged[data.key].absorb(data)
            updated += 1  # a duplicate within the file updates the contact of its first row
        else:
            merged[data.key] = data

    with transaction.atomic():
        existing = {
            contact.email_lower: contact
            for contact in Contact.objects.filter(
                account_id=account_id, email_lower__in=list(merged)
            )
        }
        # New addresses that were suppressed before (their contact deleted since).
        suppressed = suppressions_for(
            account_id=account_id, keys=[key for key in merged if key not in existing]
        )
        now = timezone.now()
        rows_out = []
        for key, data in merged.items():
            contact = existing.get(key)
            if contact is None:
                created += 1
                contact = Contact(
                    account_id=account_id,
                    email=data.email,
                    email_lower=key,
                    first_name=data.first_name,
                    last_name=data.last_name,
                    company=data.company,
                    fields=data.fields,
                    timezone=data.timezone,
                )
                contact_suppression_apply(contact, suppressed.get(key))
            else:
                updated += 1
                _merge_into(contact, data)
                contact.account_id = account_id
            contact.updated_at = now
            rows_out.append(contact)
        if rows_out:
            Contact.objects.bulk_create(
                rows_out,
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
        if contact_import.campaign_id and rows_out:
            if _campaign_hold(contact_import.campaign_id):
                enroll(
                    campaign_id=contact_import.campaign_id,
                    contact_ids=[c.pk for c in rows_out if not c.is_suppressed],
                )
            else:
                # Deleted during the import (the row's campaign is now NULL): the
                # contacts are still imported, there is nothing left to enroll them in.
                contact_import.campaign_id = None
        moved = ContactImport.objects.filter(
            pk=contact_import.pk, attempts=contact_import.attempts
        ).update(
            processed_rows=F("processed_rows") + len(rows),
            created_count=F("created_count") + created,
            updated_count=F("updated_count") + updated,
            skipped_count=F("skipped_count") + skipped,
            errors=errors,
            heartbeat_at=now,
        )
        if not moved:
            raise _RunSuperseded()
    return len(rows)


def _campaign_hold(campaign_id) -> bool:
    """Whether the campaign still exists. On PostgreSQL the row is also held (FOR KEY
    SHARE, as the enrollments' foreign keys would) until the transaction ends, so it
    cannot be deleted between this check and the enrollments' commit; concurrent
    imports into the campaign do not block each other. SQLite runs one writer at a
    time."""
    if connection.vendor != "postgresql":
        return Campaign.objects.filter(pk=campaign_id).exists()
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT 1 FROM {Campaign._meta.db_table} WHERE id = %s FOR KEY SHARE",  # noqa: S608
            [campaign_id],
        )
        return cursor.fetchone() is not None


def contact_imports_redrive(*, now: datetime | None = None) -> list:
    """Re-queue imports whose run died (processing, heartbeat stale) or whose task never
    reached a worker (pending for longer than the stale delay). Beat runs it."""
    from outreach.tasks import import_contacts

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
