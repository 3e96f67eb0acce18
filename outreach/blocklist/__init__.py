"""The account's blocklist: addresses and domains (subdomains included) it never sends to.

- `models.py`: BlocklistEntry;
- `entries.py`: what an entry may be (an address or a domain, normalised) and which
  entries an address matches (the address itself, its domain and every parent domain);
- `selectors.py`: the entries of an account, and the blocked addresses among many (one
  query);
- `services.py`: adding entries in bulk, deleting one;
- `api.py`: `/blocklist`, `/blocklist/:id`, `/blocklist.csv`; `admin.py`: the back office.

Where it is applied (docs/deliverability.md, "Blocklist"): contact imports and outreaches
skip a blocked address, dispatch stops a blocked contact's pending enrollment, and the
send scheduler stops a due one before its next step (`stop_reason` `blocked`,
outreach.sending.blocked). It imports the models of the app and `outreach.emails` only.
"""
