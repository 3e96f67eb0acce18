"""The mailbox provider behind a recipient domain, for the circuit breaker
(outreach.sending.breaker; docs/deliverability.md, "The circuit breaker"): `google`,
`microsoft`, `yahoo`, `apple` or `other`, read from the domain's MX hosts through the
service's resolver (config.dns, cached per process for each answer's TTL).

    recipient_provider("acme.example")  # MX 10 aspmx.l.google.com. -> "google"

The providers' consumer domains (gmail.com, outlook.com, ...) are known without a
lookup. With RECIPIENT_PROVIDER_LOOKUP off, or when the lookup fails, any other domain
is `other`: a failure is never taken for a provider.
"""

from django.conf import settings

from config import dns
from outreach.models.reputation import RecipientProvider

GOOGLE = RecipientProvider.GOOGLE.value
MICROSOFT = RecipientProvider.MICROSOFT.value
YAHOO = RecipientProvider.YAHOO.value
APPLE = RecipientProvider.APPLE.value
OTHER = RecipientProvider.OTHER.value

# MX host name endings, as each provider publishes them (Google Workspace, Microsoft 365
# and Outlook.com, Yahoo and AOL, iCloud).
_MX_SUFFIXES = (
    ("google.com", GOOGLE),
    ("googlemail.com", GOOGLE),
    ("mail.protection.outlook.com", MICROSOFT),
    ("olc.protection.outlook.com", MICROSOFT),
    ("outlook.com", MICROSOFT),
    ("hotmail.com", MICROSOFT),
    ("yahoodns.net", YAHOO),
    ("mail.icloud.com", APPLE),
    ("me.com", APPLE),
)

_CONSUMER_DOMAINS = {
    "gmail.com": GOOGLE,
    "googlemail.com": GOOGLE,
    "outlook.com": MICROSOFT,
    "hotmail.com": MICROSOFT,
    "live.com": MICROSOFT,
    "msn.com": MICROSOFT,
    "yahoo.com": YAHOO,
    "ymail.com": YAHOO,
    "aol.com": YAHOO,
    "icloud.com": APPLE,
    "me.com": APPLE,
    "mac.com": APPLE,
}


def mx_provider(host: str) -> str:
    """The provider an MX host name belongs to (`other` when none)."""
    host = host.rstrip(".").lower()
    for suffix, provider in _MX_SUFFIXES:
        if host == suffix or host.endswith("." + suffix):
            return provider
    return OTHER


def recipient_domain(email: str) -> str:
    return email.rpartition("@")[2].strip().rstrip(".").lower()


def recipient_provider(domain: str) -> str:
    """The provider of a recipient domain (see the module docstring)."""
    domain = domain.strip().rstrip(".").lower()
    known = _CONSUMER_DOMAINS.get(domain)
    if known is not None:
        return known
    if not domain or not settings.RECIPIENT_PROVIDER_LOOKUP:
        return OTHER
    answer = dns.lookup(domain, "MX")
    if not answer.found:
        return OTHER
    # The most preferred host decides ("10 aspmx.l.google.com.": preference, host).
    hosts = sorted(
        (int(pref), host)
        for pref, _, host in (record.partition(" ") for record in answer.records)
        if pref.isdigit()
    )
    return mx_provider(hosts[0][1]) if hosts else OTHER


def recipient_providers(domains) -> dict[str, str]:
    """Each of `domains` with its provider."""
    return {domain: recipient_provider(domain) for domain in set(domains)}
