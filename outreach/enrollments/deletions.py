"""Deleting enrollments: each taken out of its campaign's stats (its counts, its
variants' and its branches'), and a tombstone left for each that sent email (its
unsubscribe links still find the contact). The transitions' companion: same rules,
the caller's transaction."""

from collections import Counter
from collections.abc import Iterable
from uuid import UUID

from django.db import connection, transaction
from django.db.models import QuerySet

from outreach.enrollments.branching import branch_counts_write
from outreach.enrollments.stats import (
    ANSWERS,
    STAT_NAMES,
    answer_split,
    count,
    counted,
    counting,
    variant_count,
)
from outreach.models.branches import BranchDecision
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.sending import Enrollment, Message
from outreach.models.tombstones import DeletedEnrollment


def _uncount(enrollments: list[Enrollment]) -> None:
    for enrollment in enrollments:
        count(enrollment.campaign_id, **{k: -v for k, v in counted(enrollment).items()})
        for name in ANSWERS:
            code = getattr(enrollment, f"{name}_on")
            if code:
                step, letter = answer_split(code)
                variant_count(enrollment.campaign_id, step, letter, **{name: -1})
    campaigns = {enrollment.pk: enrollment.campaign_id for enrollment in enrollments}
    decided: Counter = Counter()
    for enrollment_id, key, outcome in BranchDecision.objects.filter(
        enrollment_id__in=list(campaigns)
    ).values_list("enrollment_id", "key", "outcome"):
        decided[campaigns[enrollment_id], key, outcome] -= 1
    branch_counts_write(decided)
    for enrollment_id, step, variant in Message.objects.filter(
        enrollment_id__in=list(campaigns)
    ).values_list("enrollment_id", "step", "variant"):
        variant_count(campaigns[enrollment_id], step, variant, sent=-1)


def _locked(queryset) -> list[Enrollment]:
    # Locked: a change racing the delete either lands first (and is taken out with the
    # row) or finds no row (and counts nothing).
    return list(
        queryset.select_for_update()
        .order_by("pk")
        .only(
            "campaign_id",
            *(f"{name}_at" for name in STAT_NAMES[1:]),
            *(f"{name}_on" for name in ANSWERS),
        )
    )


def contact_delete(*, contact: Contact) -> None:
    """Delete a contact and its enrollments, taking them out of their campaigns' stats."""
    with transaction.atomic(), counting():
        # The contact before its enrollments, as an unsubscribe or a bounce locks them.
        if not Contact.objects.select_for_update().filter(pk=contact.pk).exists():
            return
        _uncount(_locked(Enrollment.objects.filter(contact_id=contact.pk)))
        Contact.objects.filter(pk=contact.pk).delete()


def _tombstones_write(enrollments: QuerySet) -> None:
    """A DeletedEnrollment for each of `enrollments` that sent email, so the unsubscribe
    links of its emails still find the contact. One INSERT ... SELECT, whatever the
    number (a campaign of a million enrollments)."""
    select, params = (
        enrollments.filter(sent_at__isnull=False)
        .order_by()
        .values_list("id", "contact_id", "credential_id")
        .query.sql_with_params()
    )
    table = DeletedEnrollment._meta.db_table
    with connection.cursor() as cursor:
        # The SELECT is the ORM's, its values parameters: nothing is interpolated.
        cursor.execute(f"INSERT INTO {table} (id, contact_id, credential_id) {select}", params)  # noqa: S608


def enrollments_delete(*, enrollment_ids: Iterable[UUID]) -> int:
    """Delete enrollments (the back office's delete), taking them out of their campaigns'
    stats and leaving the tombstones of those that sent email. Returns how many were
    deleted."""
    with transaction.atomic(), counting():
        rows = _locked(Enrollment.objects.filter(pk__in=list(enrollment_ids)))
        _uncount(rows)
        ids = [row.pk for row in rows]
        _tombstones_write(Enrollment.objects.filter(pk__in=ids))
        Enrollment.objects.filter(pk__in=ids).delete()
    return len(rows)


def campaign_delete(*, campaign_id: UUID) -> None:
    """Delete a campaign and its enrollments (its stats go with it), leaving the
    tombstones of the enrollments that sent email."""
    with transaction.atomic():
        _tombstones_write(Enrollment.objects.filter(campaign_id=campaign_id))
        Campaign.objects.filter(pk=campaign_id).delete()
