"""Where the tracking links of an account's emails point: the open pixel
(`/t/o/<token>.gif`) and the click redirect (`/t/c/<token>`) are both built on
`tracking_base_url`, the one place that decides their host (docs/deliverability.md)."""

from django.conf import settings


def tracking_base_url(account) -> str:
    """The scheme and host, without a trailing slash, of the tracking links in
    `account`'s emails: the service's own `BASE_URL`."""
    return settings.BASE_URL
