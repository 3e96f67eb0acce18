"""What `make run` prints before it starts the processes: where things are, and which
optional parts are off (and the variable that turns each on).

A command of plans, the one app it reads (the plans without a Stripe price): config
imports no app."""

import os

from django.conf import settings
from django.core.management.base import BaseCommand

from config import embedded_db
from plans.models import Plan


def _where() -> list[str]:
    """Where the API, the docs, the admin and (embedded) the database are."""
    base = settings.BASE_URL
    if settings.EMBEDDED:
        mode = f"embedded mode (development), files under {settings.VAR_DIR}"
    else:
        mode = "production mode"
    lines = [
        f"Outreach service: {mode}",
        f"  API    {base}  (first steps: README, 'First ten minutes')",
        f"  Docs   {base}/docs",
        f"  Admin  {base}/admin/  (user: .venv/bin/python manage.py createsuperuser)",
    ]
    if settings.EMBEDDED:
        data = settings.EMBEDDED_DATABASE_DIR
        lines.append(f"  Data   PostgreSQL in {data}  (make clean removes it)")
        lines.append(f"  psql   {embedded_db.psql_command(data)}")
    bind = os.environ.get("BIND", "")
    if bind and bind not in base:
        lines.append(f"  Listening on {bind} (BIND); links use BASE_URL")
    return lines


def banner_text() -> str:
    lines = _where()
    off = []
    if not settings.STRIPE_SECRET_KEY:
        off.append("Stripe       STRIPE_SECRET_KEY unset: no customers, no checkout or portal")
    # The paid plans checkout refuses for want of a price (plans.models.PURCHASABLE_RULE).
    unpriced = list(
        Plan.objects.refused_as("unpriced").order_by("tier", "slug").values_list("slug", flat=True)
    )
    if unpriced:
        listed = Plan.objects.purchasable().exists()
        off.append(
            f"Plan prices  {', '.join(unpriced)} unpriced: "
            + ("GET /plans omits them" if listed else "GET /plans is empty")
            + ", checkout refuses them"
        )
        variables = ", ".join(f"STRIPE_PRICE_{slug.upper()}" for slug in unpriced)
        off.append(f"             ({variables} at the first migrate, or in the admin)")
    if not settings.EMBEDDED:  # the embedded mode lists them with its development defaults
        off += _abuse_guards_off()
    if not settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS:
        off.append(
            "Webhooks to private and loopback addresses refused "
            "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true for local trials)"
        )
    if off:
        lines.append("Off:")
        lines += [f"  {line}" for line in off]

    if settings.EMBEDDED:
        lines += _development_defaults()
    elif settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS:
        lines.append(
            "Warning: webhooks to private and loopback addresses allowed "
            "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true): tests and local development only"
        )
    return "\n".join(lines)


def _abuse_guards_off() -> list[str]:
    """Production's guards against an account spraying mail, when an operator turned
    them off (the "Off:" list)."""
    off = []
    if not settings.SIGNUP_EMAIL_VERIFICATION:
        off.append(
            "Signup proof SIGNUP_EMAIL_VERIFICATION=false: new accounts send without "
            "proving their address"
        )
    if not settings.SMTP_REQUIRE_LOGIN:
        off.append("SMTP login   SMTP_REQUIRE_LOGIN=false: mailboxes may send without a login")
    if not settings.RECIPIENT_DOMAIN_CHECK:
        off.append(
            "Recipients   RECIPIENT_DOMAIN_CHECK=false: addresses of domains without a mail "
            "server are imported and sent to"
        )
    return off


def _development_defaults() -> list[str]:
    """What the embedded mode relaxes, and production keeps strict."""
    lines = ["Development defaults (production keeps them strict):"]
    if settings.OUTBOUND_ALLOW_PRIVATE_NETWORKS:
        lines.append(
            "  Webhooks to private and loopback addresses allowed "
            "(OUTBOUND_ALLOW_PRIVATE_NETWORKS=true)"
        )
    lines.append(
        f"  Signups: {settings.SIGNUP_RATE_LIMIT} per IP per hour, production 5 (SIGNUP_RATE_LIMIT)"
    )
    if not settings.SIGNUP_EMAIL_VERIFICATION:
        lines.append(
            "  Signups need no proof of address; production emails a link first "
            "(SIGNUP_EMAIL_VERIFICATION)"
        )
    if not settings.SMTP_REQUIRE_LOGIN:
        lines.append(
            "  Mailboxes may send without a login; production requires one (SMTP_REQUIRE_LOGIN)"
        )
    if not settings.RECIPIENT_DOMAIN_CHECK:
        lines.append(
            "  Recipient domains are not checked in DNS; production skips those without a "
            "mail server (RECIPIENT_DOMAIN_CHECK)"
        )
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        # Said here once rather than by each Celery worker (config/worker.py).
        lines.append(
            "  Running as root: Celery's warning about it is left out; production runs "
            "its workers as a user of their own"
        )
    return lines


class Command(BaseCommand):
    help = "Print where the API, docs and admin are, and which optional parts are off."

    def handle(self, *args, **options):
        self.stdout.write(banner_text())
