"""Re-read every account's Stripe subscription and put the account where Stripe
says: the safety net for missed or failed notifications. Safe to re-run: it only
ever converges on Stripe's current state."""

from django.core.management.base import BaseCommand

from accounts.models import Account
from billing import services
from config.api.errors import PspUnavailable


class Command(BaseCommand):
    help = "Reconcile every account that has a Stripe subscription with Stripe."

    def handle(self, *args, **options):
        accounts = (
            Account.objects.filter(psp_subscription_id__isnull=False)
            .exclude(psp_subscription_id="")
            .select_related("plan")
            .order_by("created_at", "pk")
        )
        total = accounts.count()
        failed = changed = 0
        self.stdout.write(f"Reconciling {total} account(s) with a subscription.")
        for index, account in enumerate(accounts.iterator(), start=1):
            before = (account.plan.slug, account.psp_subscription_status)
            try:
                outcome, detail = services.subscription_sync(account=account)
            except PspUnavailable:
                failed += 1
                self.stderr.write(f"[{index}/{total}] {account.email}: Stripe unavailable")
                continue
            account.refresh_from_db()
            after = (account.plan.slug, account.psp_subscription_status)
            changed += before != after
            change = "unchanged" if before == after else f"{before[0]} -> {after[0]}"
            self.stdout.write(f"[{index}/{total}] {account.email}: {outcome}, {detail} ({change})")
        self.stdout.write(
            f"Done: {total} checked, {changed} changed, {failed} failed (re-run to retry them)."
        )
        if failed:
            raise SystemExit(1)
