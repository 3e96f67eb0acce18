"""What a blocklist entry may be, and which entries an address matches.

An entry is an address (`ada@example.com`, matched exactly, case-insensitively) or a
domain (`example.com`, or `@example.com`), which also blocks every subdomain
(`mail.example.com`). Both are stored in the form contacts' addresses are compared in:
lower case, an internationalised domain in its Unicode form, so `ADA@Exämple.com` and
`ada@xn--exmple-cua.com` are the same entry.
"""

from config.api.csv_export import csv_cell_read
from outreach.emails import InvalidEmail, email_clean
from outreach.models.blocklist import BlocklistEntry

VALUE_MAX = 254


class InvalidEntry(ValueError):
    pass


def entry_clean(raw: object) -> tuple[str, str]:
    """(value, kind) of one entry as given; InvalidEntry with a message otherwise."""
    if not isinstance(raw, str) or not raw.strip():
        raise InvalidEntry("An entry is an email address or a domain; this one is empty.")
    # An exported `value` cell reads back as the entry it was (config.api.csv_export).
    text = csv_cell_read(raw.strip())
    if len(text) > VALUE_MAX:
        raise InvalidEntry(f"An entry has at most {VALUE_MAX} characters.")
    if "@" in text.lstrip("@"):
        try:
            return email_clean(text).lower(), BlocklistEntry.Kind.EMAIL
        except InvalidEmail as exc:
            raise InvalidEntry(f"Not a valid email address: {exc}") from None
    domain = text.lstrip("@").rstrip(".")
    try:
        # The domain rules of an address's domain (syntax, IDNA, at least two labels).
        cleaned = email_clean(f"a@{domain}")
    except InvalidEmail:
        raise InvalidEntry(
            "Not a valid domain: give a domain such as example.com, or an email address."
        ) from None
    return cleaned.rpartition("@")[2].lower(), BlocklistEntry.Kind.DOMAIN


def address_keys(email_lower: str) -> list[str]:
    """The entry values that block an address (lower-cased as stored): the address, its
    domain, and each parent domain of at least two labels."""
    domain = email_lower.rpartition("@")[2]
    keys = [email_lower]
    labels = domain.split(".")
    keys += [".".join(labels[index:]) for index in range(len(labels) - 1)]
    return keys
