"""Tombstones: what an enrollment leaves when it is deleted while its contact stays."""

from django.db import models
from django.db.models.functions import Now

from outreach.models.contacts import Contact
from outreach.models.mailboxes import SmtpCredential


class DeletedEnrollment(models.Model):
    """The tombstone of a deleted enrollment that had sent email (its campaign deleted,
    or the enrollment deleted by staff): its id, contact and mailbox. The unsubscribe
    link of an email sent before links named their contact names only the enrollment;
    this row still leads it to the contact (docs/intake.md, "Unsubscribe"). It goes
    with its contact: a deleted contact's links are dead anyway."""

    # The deleted enrollment's id.
    id = models.UUIDField(primary_key=True, editable=False)
    contact = models.ForeignKey(Contact, on_delete=models.CASCADE, related_name="+")
    # Whom the unsubscribe page names as the sender.
    credential = models.ForeignKey(
        SmtpCredential, on_delete=models.SET_NULL, null=True, blank=True, related_name="+"
    )
    deleted_at = models.DateTimeField(db_default=Now())

    def __str__(self) -> str:
        return f"deleted enrollment {self.id} of {self.contact_id}"
