"""The lock every billing writer of an account takes."""

from accounts.models import Account


def account_lock(account_pk) -> Account:
    """Lock the account row for this transaction.

    FOR NO KEY UPDATE on PostgreSQL: it serializes billing writers of the
    account without blocking inserts that reference the account (their foreign
    key check takes KEY SHARE), such as the per-request counting. Never held
    across a call to Stripe.
    """
    return Account.objects.select_for_update(no_key=True).get(pk=account_pk)
