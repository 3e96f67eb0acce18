"""The account's customer at the payment provider, made at signup."""

from collections.abc import Callable

from billing import psp


def signup_customer_create(account) -> Callable[[], None] | None:
    """accounts' signup step (registered by BillingConfig.ready): when the payment
    provider is configured, create the account's customer and set its id on the
    account, which the signup's transaction then inserts with it. Runs before that
    transaction, none open while Stripe answers; returns the undo that deletes the
    customer at the provider if the signup then fails."""
    if not psp.psp_configured():
        return None
    customer_id = psp.customer_create(
        email=account.email, name=account.name, account_id=str(account.pk)
    )
    account.psp_customer_id = customer_id

    def undo() -> None:
        psp.customer_discard(customer_id)

    return undo
