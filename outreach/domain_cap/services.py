"""Writes of the account's sending defaults (the cap per recipient domain of the
campaigns that name none); the view validates, then calls this."""

from accounts.models import Account


def sending_defaults_update(*, account: Account, data: dict) -> Account:
    """Set the account's sending defaults given in `data` (the others stay)."""
    if "max_per_recipient_domain_per_day" in data:
        account.max_per_recipient_domain_per_day = data["max_per_recipient_domain_per_day"]
        Account.objects.filter(pk=account.pk).update(
            max_per_recipient_domain_per_day=account.max_per_recipient_domain_per_day
        )
    return account
