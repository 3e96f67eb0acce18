"""Deliverability in plain words for an agent: a mailbox's sender domain check (SPF, DKIM,
DMARC, MX) as sentences, and the blocklist's answers as a sentence."""

from typing import Any

from outreach_sdk import models

# What an error finding means for sending, said once after the findings.
ERROR_MEANS = (
    "Gmail, Yahoo and Outlook.com refuse or junk bulk mail from a domain that fails these "
    "checks. Fix the DNS records at the domain's DNS host, then run check_sender_domain "
    "again. A campaign with require_authenticated_domain holds sends from this mailbox "
    "until then."
)
ALL_IN_ORDER = "SPF, DKIM, DMARC and MX are in order."


def _count(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def domain_check_summary(check: models.DomainCheck, from_email: str | None = None) -> list[str]:
    """The check as sentences: what was found, each finding with its level, and what the
    errors mean for sending."""
    who = f"{from_email} sends as {check.domain}" if from_email else f"{check.domain}"
    if check.status == "pending":
        return [f"{who}: not checked yet. Run check_sender_domain to check it now."]
    when = check.checked_at.strftime("%Y-%m-%d %H:%M UTC") if check.checked_at else "unknown"
    if not check.findings:
        return [f"{who}: passes (checked {when}). {ALL_IN_ORDER}"]
    errors, warnings = len(check.errors), len(check.warnings)
    counts = ", ".join(
        _count(n, word) for n, word in ((errors, "error"), (warnings, "warning")) if n
    )
    lines = [f"{who}: {counts} (checked {when})."]
    lines += [f"{f.level.capitalize()} ({f.code}): {f.message}" for f in check.findings]
    if errors:
        lines.append(ERROR_MEANS)
    else:
        lines.append("Only warnings: nothing holds sends, but consider fixing them.")
    return lines


def domain_check_answer(check: models.DomainCheck, from_email: str | None = None) -> dict:
    return {**check.raw, "summary": domain_check_summary(check, from_email)}


def blocklist_add_summary(result: models.BlocklistAddResult) -> str:
    parts = [f"{_count(result.added, 'entry', 'entries')} added"]
    if result.existing:
        parts.append(f"{result.existing} already on the blocklist")
    if result.invalid:
        parts.append(f"{len(result.invalid)} not an address or a domain (see invalid)")
    return "; ".join(parts) + "."


def blocklist_add_answer(result: models.BlocklistAddResult) -> dict[str, Any]:
    return {
        **result.raw,
        "summary": blocklist_add_summary(result),
        "note": "Blocked addresses and domains (subdomains included) are skipped at import "
        "and enroll, and a running sequence to them stops before its next step; removing "
        "the entry later does not restart it.",
    }
