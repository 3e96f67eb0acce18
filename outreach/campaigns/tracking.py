"""Where the tracking links of an account's emails point: the open pixel
(`/t/o/<token>.gif`) and the click redirect (`/t/c/<token>`) are both built on
`tracking_base_url`, the one place that decides their host (docs/deliverability.md)."""

from django.conf import settings

from accounts.models import Account


def tracking_base_url(account: Account) -> str:
    """The scheme and host, without a trailing slash, of the tracking links in
    `account`'s emails: `https://<tracking domain>` once the account's tracking domain is
    verified (outreach.domains.tracking), else the service's own BASE_URL. Reads only
    the account row."""
    if (
        account.tracking_domain
        and account.tracking_domain_status == Account.TrackingDomainStatus.VERIFIED
    ):
        return f"https://{account.tracking_domain}"
    return settings.BASE_URL
