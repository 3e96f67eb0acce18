"""Shared set-up for the outreach benchmarks: Django against DATABASE_URL, migrated."""

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Production mode wants these; a benchmark only needs them to be well-formed.
os.environ.setdefault("SECRET_KEY", "bench-only-secret-key-0000000000000000000000000000")
os.environ.setdefault("FIELD_ENCRYPTION_KEY", "YmVuY2gtb25seS1maWVsZC1rZXktMDAwMDAwMDAwMDA=")
os.environ.setdefault("CELERY_TASK_ALWAYS_EAGER", "true")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402


def prepare():
    if connection.vendor != "postgresql":
        print("note: DATABASE_URL is not PostgreSQL; the goals are stated for PostgreSQL.")
    call_command("migrate", verbosity=0)


def account_create(label: str):
    from accounts.models import Account
    from plans.models import Plan

    return Account.objects.create(
        email=f"bench-{label}-{os.getpid()}@example.com", plan=Plan.objects.get(slug="free")
    )


def account_drop(account) -> None:
    """Delete the bench rows fast (raw deletes, children first)."""
    from outreach.models import Campaign, Contact, ContactImport, Enrollment, SmtpCredential

    for queryset in (
        Enrollment.objects.filter(campaign__account=account),
        Contact.objects.filter(account=account),
        ContactImport.objects.filter(account=account),
    ):
        queryset._raw_delete(queryset.db)
    for model in (Campaign, SmtpCredential):
        model.objects.filter(account=account).delete()
    account.delete()
