"""Re-read every account's Stripe subscriptions and put the account where Stripe
says (one live subscription: newer duplicates are cancelled): the safety net for
missed or failed notifications. Safe to re-run: it only
ever converges on Stripe's current state. Beat runs the same service daily
(billing.tasks.subscriptions_reconcile)."""

from typing import Any

from django.core.management.base import BaseCommand

from accounts.models import Account
from billing.reconcile import ReconcileItem, subscriptions_reconcile


class Command(BaseCommand):
    help = "Reconcile every account that has a Stripe subscription with Stripe."

    def handle(self, *args: Any, **options: Any) -> None:
        total = (
            Account.objects.filter(psp_subscription_id__isnull=False)
            .exclude(psp_subscription_id="")
            .count()
        )
        self.stdout.write(f"Reconciling {total} account(s) with a subscription.")

        def progress(index: int, total: int, item: ReconcileItem) -> None:
            prefix = f"[{index}/{total}] {item.account.email}"
            if item.failed:
                self.stderr.write(f"{prefix}: Stripe unavailable")
                return
            change = f"{item.plan_before} -> {item.plan_after}" if item.changed else "unchanged"
            self.stdout.write(f"{prefix}: {item.outcome}, {item.detail} ({change})")

        result = subscriptions_reconcile(progress=progress)
        self.stdout.write(
            f"Done: {result.checked} checked, {result.changed} changed, "
            f"{result.failed} failed (re-run to retry them)."
        )
        if result.search_failed:
            self.stderr.write(
                "Stripe's live subscriptions could not be listed: accounts that do not "
                "know of theirs were not checked (re-run to retry)."
            )
        if result.failed or result.search_failed:
            raise SystemExit(1)
