"""System checks of the webhook settings (shown by `manage.py check` and before
every management command such as `migrate`)."""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core.checks import Warning, register


@register()
def claim_lease_check(
    app_configs: Sequence[AppConfig] | None = None, **kwargs: Any
) -> list[Warning]:
    lease = settings.WEBHOOK_CLAIM_LEASE_SECONDS
    # The attempt's total deadline, and slack for the name lookup before the connect
    # (the one step no deadline can cut off).
    longest_attempt = settings.WEBHOOK_TIMEOUT_SECONDS + 5
    if lease > longest_attempt:
        return []
    return [
        Warning(
            f"WEBHOOK_CLAIM_LEASE_SECONDS ({lease}) does not "
            f"outlast the longest delivery attempt ({longest_attempt:g} s).",
            hint="An attempt can then outlive its claim and another worker repeat it: "
            "raise WEBHOOK_CLAIM_LEASE_SECONDS above WEBHOOK_TIMEOUT_SECONDS + 5.",
            id="webhooks.W001",
        )
    ]
