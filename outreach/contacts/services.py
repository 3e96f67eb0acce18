"""Contact services: create, update and upsert contacts."""

from typing import Any

from django.db import IntegrityError, transaction

from accounts.models import Account
from config.api.errors import ValidationFailed
from config.db.rows import row_change
from outreach.contacts.data import ContactData
from outreach.contacts.suppression import Suppressed, contact_suppression_apply, suppressions_for
from outreach.emails import simulator_address
from outreach.errors import ContactNotFound
from outreach.models.campaigns import Campaign
from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential

# --- Contacts ------------------------------------------------------------------------


def _duplicate_email() -> ValidationFailed:
    return ValidationFailed({"email": ["A contact with this email already exists."]})


def contact_build(*, account_id: Any, data: ContactData, suppression: Suppressed | None) -> Contact:
    """An unsaved contact for `data`, carrying its address's `suppression`, if any."""
    contact = Contact(
        account_id=account_id,
        email=data.email,
        email_lower=data.key,
        first_name=data.first_name,
        last_name=data.last_name,
        company=data.company,
        fields=data.fields,
        timezone=data.timezone,
    )
    contact_suppression_apply(contact, suppression)
    return contact


def _contact_new(*, account: Account, data: ContactData) -> Contact:
    """An unsaved contact for `data`, carrying its address's suppression, if any."""
    found = suppressions_for(account_id=account.pk, keys=[data.key])
    return contact_build(account_id=account.pk, data=data, suppression=found.get(data.key))


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


def _in_a_campaign_with_a_real_mailbox(contact: Contact) -> bool:
    return (
        Campaign.credentials.through.objects.filter(campaign__enrollments__contact_id=contact.pk)
        .exclude(smtpcredential__auth_method=SmtpCredential.AuthMethod.SIMULATOR)
        .exists()
    )


def contact_update(*, contact: Contact, changes: dict[str, Any]) -> Contact:
    """PATCH semantics: the given attributes replace the stored ones (fields as a whole)."""
    if simulator_address(changes.get("email", "")) and _in_a_campaign_with_a_real_mailbox(contact):
        # The mailbox simulator's address never reaches a real mailbox (docs/sandbox.md).
        raise ValidationFailed(
            {
                "email": [
                    "An address at simulator.test is the mailbox simulator's: the contact is "
                    "in a campaign with a real mailbox, which never sends to it."
                ]
            }
        )
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

    def change(current: Contact) -> None:
        for name, value in changes.items():
            setattr(current, name, value)
        if new_key is not None and new_key != current.email_lower:
            # A new address brings its own suppression with it.
            found = suppressions_for(account_id=current.account_id, keys=[new_key])
            contact_suppression_apply(current, found.get(new_key))

    # On the row as it is now (config.db.rows): an unsubscribe or a bounce recorded
    # since the request read it stays.
    try:
        return row_change(contact, change, missing=ContactNotFound)
    except IntegrityError:
        raise _duplicate_email() from None


def contact_merge_into(contact: Contact, data: ContactData) -> None:
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
            contact_merge_into(contact, data)
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
