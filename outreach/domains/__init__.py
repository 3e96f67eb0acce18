"""Domains the service looks up in DNS before it sends (docs/deliverability.md):

- config.dns: the one resolver every check uses (DNS_RESOLVERS, DNS_TIMEOUT_SECONDS);
- `sender`: a mailbox's From domain: SPF, DKIM, DMARC, MX, as findings;
- `recipients`: whether a contact's domain can receive mail at all (RECIPIENT_DOMAIN_CHECK);
- `consumer`: the consumer mail domains (gmail.com, ...), where a domain is not a company;
- `tracking`: the account's tracking domain, taken with its CNAME and TXT record, kept by its CNAME;
- `models`, `services`, `api`, `beat`, `admin`: the stored sender checks and their API.
"""
