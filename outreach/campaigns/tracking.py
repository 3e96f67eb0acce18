"""Where the tracking links of an account's emails point (open pixel, click links)."""

from django.conf import settings

from accounts.models import Account


def tracking_base_url(account: Account) -> str:
    """`https://<tracking domain>` once the account's tracking domain is verified
    (outreach.domains.tracking), else BASE_URL. Reads only the account row."""
    if (
        account.tracking_domain
        and account.tracking_domain_status == Account.TrackingDomainStatus.VERIFIED
    ):
        return f"https://{account.tracking_domain}"
    return settings.BASE_URL
