"""The check of a mailbox's From domain: SPF, DKIM, DMARC and MX, as findings
(docs/deliverability.md, "Sender domains").

`sender_domain_inspect(domain, selectors)` asks DNS (config.dns) and answers the records
it found and a list of findings, each a code, a level (`error`: receivers such as Gmail,
Yahoo and Outlook.com refuse or junk such mail; `warning`: worth fixing, or could not be
checked) and a message. A lookup that fails is a warning (`dns_lookup_failed`), never an
error: an unanswered question proves nothing.
"""

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from config.dns import FAILED, NXDOMAIN, Lookup, lookup

ERROR = "error"
WARNING = "warning"

# DKIM selectors looked up besides the account's own: Google Workspace's and Microsoft
# 365's usual ones.
USUAL_DKIM_SELECTORS = ("google", "selector1", "selector2")
DKIM_SELECTORS_MAX = 10
# RFC 7208 4.6.4: at most 10 terms that cause DNS lookups over the whole evaluation.
SPF_LOOKUP_LIMIT = 10
# Includes followed at most (a loop, or a chain deeper than any real one, stops here).
SPF_DEPTH_MAX = 10

_SPF_MECHANISM = re.compile(
    r"^[+\-~?]?(all|include:\S+|a(:\S+)?(/\d+){0,2}|mx(:\S+)?(/\d+){0,2}|ptr(:\S+)?"
    r"|ip4:[0-9./]+|ip6:[0-9a-fA-F:./]+|exists:\S+)$",
    re.IGNORECASE,
)
_SPF_MODIFIER = re.compile(r"^[a-zA-Z][a-zA-Z0-9\-_.]*=\S*$")
_DMARC_POLICIES = ("none", "quarantine", "reject")


@dataclass(frozen=True)
class Finding:
    code: str
    level: str
    message: str


@dataclass
class Inspection:
    domain: str
    findings: list[Finding] = field(default_factory=list)
    # What was found: {"spf": str|None, "dmarc": str|None, "dkim_selectors": [...], "mx": [...]}
    records: dict = field(default_factory=dict)

    def add(self, code: str, level: str, message: str) -> None:
        self.findings.append(Finding(code, level, message))

    def failed(self, found: Lookup) -> None:
        self.add(
            "dns_lookup_failed",
            WARNING,
            f"The {found.rdtype} lookup of {found.name} failed ({found.error}); it is checked "
            "again at the next check.",
        )

    def findings_json(self) -> list[dict]:
        return [asdict(f) for f in self.findings]


def sender_domain_inspect(domain: str, selectors: list[str]) -> Inspection:
    inspection = Inspection(domain=domain.lower())
    _spf_check(inspection)
    _dkim_check(inspection, selectors)
    _dmarc_check(inspection)
    _mx_check(inspection)
    return inspection


# --- SPF -----------------------------------------------------------------------------------


def _spf_records(name: str) -> tuple[Lookup, list[str]]:
    found = lookup(name, "TXT")
    return found, [r for r in found.records if r.lower().split(" ", 1)[0] == "v=spf1"]


def _spf_check(inspection: Inspection) -> None:
    domain = inspection.domain
    found, records = _spf_records(domain)
    inspection.records["spf"] = records[0] if len(records) == 1 else None
    if found.status == FAILED:
        inspection.failed(found)
        return
    if not records:
        inspection.add(
            "spf_missing",
            ERROR,
            f"{domain} publishes no SPF record (a TXT record starting v=spf1): receivers "
            "cannot tell which servers may send its mail.",
        )
        return
    if len(records) > 1:
        inspection.add(
            "spf_multiple",
            ERROR,
            f"{domain} publishes {len(records)} SPF records; RFC 7208 allows one (receivers "
            "treat this as a permanent error). Merge them.",
        )
        return
    counter: dict[str, Any] = {"lookups": 0, "failed": []}
    problems = _spf_walk(records[0], domain, counter, depth=0)
    for problem in problems:
        inspection.add("spf_syntax", ERROR, problem)
    for failed in counter["failed"]:
        inspection.failed(failed)
    if counter["lookups"] > SPF_LOOKUP_LIMIT:
        inspection.add(
            "spf_too_many_lookups",
            ERROR,
            f"The SPF record of {domain} needs {counter['lookups']} DNS lookups (include, a, "
            f"mx, ptr, exists, redirect, counted through its includes); the limit is "
            f"{SPF_LOOKUP_LIMIT}, past which receivers fail SPF. Flatten or remove includes.",
        )
    terms = records[0].split()[1:]
    if any(t.lower() in ("+all", "all") for t in terms):
        inspection.add(
            "spf_allows_all",
            WARNING,
            f"The SPF record of {domain} ends in +all: any server may send as {domain}. Use "
            "~all or -all.",
        )


def _spf_walk(record: str, name: str, counter: dict, *, depth: int) -> list[str]:
    """Syntax problems of one record; counts its lookups (and its includes') in counter."""
    problems = []
    for term in record.split()[1:]:
        lowered = term.lower().lstrip("+-~?")
        if _SPF_MODIFIER.match(term) and not _SPF_MECHANISM.match(term):
            if lowered.startswith("redirect="):
                counter["lookups"] += 1
                problems += _spf_follow(term.split("=", 1)[1], counter, depth=depth)
            continue
        if not _SPF_MECHANISM.match(term):
            problems.append(f"The SPF record of {name} has an unknown term: {term[:100]!r}.")
            continue
        if lowered.startswith(("a", "mx", "ptr", "exists:", "include:")) and lowered != "all":
            counter["lookups"] += 1
        if lowered.startswith("include:"):
            problems += _spf_follow(term.split(":", 1)[1], counter, depth=depth)
    return problems


def _spf_follow(target: str, counter: dict, *, depth: int) -> list[str]:
    if depth >= SPF_DEPTH_MAX or "%" in target:  # macros cannot be followed statically
        return []
    found, records = _spf_records(target)
    if found.status == FAILED:
        counter["failed"].append(found)
        return []
    if len(records) != 1:
        return [f"The SPF record includes {target}, which publishes no single SPF record."]
    return _spf_walk(records[0], target, counter, depth=depth + 1)


# --- DKIM ----------------------------------------------------------------------------------


def _dkim_check(inspection: Inspection, selectors: list[str]) -> None:
    domain = inspection.domain
    names = list(dict.fromkeys([*selectors, *USUAL_DKIM_SELECTORS]))
    published, revoked = [], []
    for selector in names:
        found = lookup(f"{selector}._domainkey.{domain}", "TXT")
        if found.status == FAILED:
            inspection.failed(found)
            continue
        for record in found.records:
            tags = _tags(record)
            if "p" not in tags and tags.get("v", "").upper() != "DKIM1":
                continue
            if tags.get("p", ""):
                published.append(selector)
            else:
                revoked.append(selector)
            break
    inspection.records["dkim_selectors"] = published
    if revoked:
        inspection.add(
            "dkim_revoked",
            WARNING,
            f"DKIM selector(s) {', '.join(revoked)} of {domain} publish an empty key (revoked).",
        )
    if not published:
        inspection.add(
            "dkim_not_found",
            ERROR,
            f"No DKIM key found for {domain} under the selectors {', '.join(names)}. Turn on "
            "DKIM signing at the mail provider, or name your selector (dkim_selectors).",
        )


# --- DMARC ---------------------------------------------------------------------------------


def _dmarc_check(inspection: Inspection) -> None:
    domain = inspection.domain
    found, records, at = _dmarc_lookup(domain)
    inspection.records["dmarc"] = records[0] if len(records) == 1 else None
    if found.status == FAILED:
        inspection.failed(found)
        return
    if not records:
        inspection.add(
            "dmarc_missing",
            ERROR,
            f"{domain} publishes no DMARC record (TXT at _dmarc.{domain}): Gmail, Yahoo and "
            "Outlook.com refuse bulk mail without one. Start with v=DMARC1; p=none.",
        )
        return
    if len(records) > 1:
        inspection.add(
            "dmarc_multiple",
            ERROR,
            f"_dmarc.{at} publishes {len(records)} DMARC records; receivers ignore them all.",
        )
        return
    tags = _tags(records[0])
    policy = tags.get("p", "").lower()
    if policy not in _DMARC_POLICIES:
        inspection.add(
            "dmarc_invalid",
            ERROR,
            f"The DMARC record of {at} has no valid policy (p=none, quarantine or reject).",
        )
        return
    if policy == "none":
        inspection.add(
            "dmarc_policy_none",
            WARNING,
            f"The DMARC policy of {at} is p=none (monitoring only): enough for Gmail's and "
            "Yahoo's rules; quarantine or reject protects the domain from spoofing.",
        )
    strict = [n for n in ("adkim", "aspf") if tags.get(n, "r").lower() == "s"]
    if strict:
        inspection.add(
            "dmarc_strict_alignment",
            WARNING,
            f"The DMARC record of {at} asks strict alignment ({', '.join(strict)}=s): the "
            f"DKIM signing domain and the bounce (Return-Path) domain must be exactly {domain}, "
            "not a subdomain or the provider's domain.",
        )


def _dmarc_lookup(domain: str) -> tuple[Lookup, list[str], str]:
    """The DMARC records of the domain, or else of its parent domains (the organizational
    domain's policy applies to subdomains, RFC 7489 6.6.3)."""
    labels = domain.split(".")
    found = Lookup(f"_dmarc.{domain}", "TXT", NXDOMAIN)
    for start in range(len(labels) - 1):
        at = ".".join(labels[start:])
        found = lookup(f"_dmarc.{at}", "TXT")
        records = [r for r in found.records if r.replace(" ", "").upper().startswith("V=DMARC1")]
        if records or found.status == FAILED:
            return found, records, at
    return found, [], domain


# --- MX ------------------------------------------------------------------------------------


def _mx_check(inspection: Inspection) -> None:
    domain = inspection.domain
    found = lookup(domain, "MX")
    inspection.records["mx"] = sorted(found.records)
    if found.status == FAILED:
        inspection.failed(found)
    elif found.records and len(found.records) == 1 and found.records[0].split() == ["0", "."]:
        inspection.add(
            "mx_null",
            ERROR,
            f"{domain} publishes a null MX (it accepts no mail): replies cannot reach it and "
            "many receivers refuse mail from such a domain.",
        )
    elif not found.records:
        where = "does not exist" if found.status == NXDOMAIN else "has no MX record"
        inspection.add(
            "mx_missing",
            WARNING,
            f"{domain} {where}: replies to this mailbox may not arrive.",
        )


def _tags(record: str) -> dict[str, str]:
    """The tag=value pairs of a DKIM or DMARC record."""
    tags = {}
    for part in record.split(";"):
        name, sep, value = part.strip().partition("=")
        if sep:
            tags[name.strip().lower()] = "".join(value.split())
    return tags
