"""The API errors of billing (plans, usage, checkout and the payment provider): each class is one code of the registry
(config.api.errors); BillingConfig.ready imports this module."""

from config.api.errors import ServiceError


class InvalidSignature(ServiceError):
    code = "invalid_signature"
    status = 400
    message = "The signature header is missing or does not verify."
    description = "Inbound provider notifications must carry a valid signature made with the shared signing secret."


class PlanLimitReached(ServiceError):
    code = "plan_limit_reached"
    status = 402
    message = "The plan's send limit for this period is reached."
    description = "New dispatches are refused while the current period's sends are at or above the plan's monthly limit. Sends already scheduled still go out. `details`: `current_period_sends`, `monthly_limit`."


class PlanNotFound(ServiceError):
    code = "plan_not_found"
    status = 404
    message = "No such plan."
    description = "No plan has that slug."


class AlreadySubscribed(ServiceError):
    code = "already_subscribed"
    status = 409
    message = "The account already has a subscription."
    description = "A second checkout would start a second subscription. Change or cancel the current one in the billing portal (`POST /billing/portal`)."


class CheckoutInProgress(ServiceError):
    code = "checkout_in_progress"
    status = 409
    message = "A checkout of this account is still open."
    description = "An account has at most one subscription, so it has at most one open checkout. Complete the open one (`details.url`) or wait until it expires (`details.expires_at`, 30 minutes after it was started)."


class PlanNotPurchasable(ServiceError):
    code = "plan_not_purchasable"
    status = 422
    message = "This plan cannot be purchased."
    description = "Checkout takes public, paid plans that are not archived. `details.reason` says why this one is refused: `free`, `unpriced` (a paid plan whose Stripe price is not configured yet), `private` or `archived`."


class NoPspCustomer(ServiceError):
    code = "no_psp_customer"
    status = 422
    message = "The account has no payment provider customer."
    description = "Billing checkout and portal need an account created while the payment provider was configured."


class PspUnavailable(ServiceError):
    code = "psp_unavailable"
    status = 502
    message = "The payment provider could not be reached."
    description = "Nothing was changed. Retry later."
