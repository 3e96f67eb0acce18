"""The words of the major providers and MTAs, by category, in the order they are tried:
the first rule whose pattern is found in the (lower-cased, single-spaced) reply decides.

The order matters where a reply says two things: "Sender address rejected: Domain not
found" is about the sender (`rejected`), not the recipient's domain; "Client host
blocked using Spamhaus; user unknown" is a block. Sources of the phrases: the providers'
published bounce pages (Gmail, Microsoft 365 / Outlook.com, Yahoo, Apple iCloud,
Proofpoint, Mimecast), the MTAs' sources (Postfix, Exim, Sendmail, qmail, Exchange) and
Sisimai's reason tables (BSD-2-Clause); the tests' corpus (tests/outreach/bounce_corpus)
measures them.
"""

import re

_RULES: list[tuple[str, str]] = [
    # Failures of the recipient's own system whose words would read as another category.
    (
        "system_error",
        r"not enough free space|bad interpreter|lmtp error|next-hop|back to mta"
        r"|violates rfc 1035|storedrv\.deliver|journaling|command died",
    ),
    ("syntax_error", r"(?:ehlo/helo|helo|hello|rcpt|mail) first|helo / ehlo requires"),
    # Authentication of the sender: Gmail 5.7.26/5.7.27, Outlook.com 5.7.515, DMARC, TLS.
    (
        "security_error",
        r"\b5\.7\.(?:26|27|515|509|23|20|21|22|8|57)\b|dmarc|\bspf\b|sender policy framework"
        r"|\bdkim\b|unauthenticated (?:e-?)?mail|not authenticated|authentication (?:required"
        r"|failed|is required|credentials)|required authentication level|password not accepted"
        r"|incorrect authentication|must issue a starttls|starttls-not-supported|requires? tls"
        r"|tls (?:is )?required|tls version|certificate|\bdane\b|could not retrieve credentials"
        r"|encryption (?:needed|required)|requires (?:encryption|high-strength)|dnssec"
        r"|authentication type|log in with your web browser|cannot decode response"
        r"|unauthenticated commands|identity changes|auth mode|application-specific password"
        r"|invalid credentials",
    ),
    ("virus_detected", r"virus|infected|malware|\bmalicious\b"),
    # The envelope sender, before the recipient words ("sender ... domain not found").
    (
        "rejected",
        r"sender address rejected|sender (?:address |domain )?(?:is )?(?:blocked|rejected|denied"
        r"|refused|invalid|not allowed|not in allowed)|bad (?:outbound )?sender|envelope"
        r" (?:sender|from|blocked|rejected)|domain of sender|sender verify failed|mail from"
        r" (?:rejected|refused)|blocked senders|administrative prohibition|sender was not|mail sending denied"
        r"|sender (?:address )?verification|return path|rejected by header-based manually",
    ),
    # Greylisting: a first-time sender asked to come back (a retry, not a rate limit).
    ("greylisted", r"gr[ae]y-?list"),
    (
        "rate_limited",
        r"too many (?:connections|messages|recipients|concurrent|sessions|mails)|rate limit"
        r"|(?<!size )limit exceeded|receiving mail (?:too quickly|at a rate)|throttl|unexpected volume"
        r"|exceeding .{0,30}limit|exceeded (?:their|the|its|your) limit|submission quota|daily (?:sending |smtp relay )?limit|receive limit|\[tss0"
        r"|sending quota|try again (?:later|in).{0,40}(?:rate|volume)|connection limit"
        r"|temporarily rate",
    ),
    (
        "blocked",
        r"blocked using|black ?list|block ?list|spamhaus|spamcop|barracuda|\bsorbs\b|\brbl\b"
        r"|dnsbl|(?<!not )listed (?:at|on|in) |reputation|banned(?! recipient)|client host .{0,40}(?:blocked|rejected)"
        r"|your ip|ip address .{0,60}(?:blocked|not authorized|listed|has been)|reverse dns"
        r"|ptr record|\brdns\b|(?:bad|invalid|reject\w*) (?:helo|ehlo)|(?:helo|ehlo)(?:/ehlo|/helo)? (?:argument|name|rejected|command rejected|hostname)|unusual rate of unsolicited|traffic not accepted"
        r"|ipcheck\.proofpoint|dnsbl-lookup|\[bl\d+\]|\[rl\d+\]|\[cs\d+\]|\[ts\d+\]"
        r"|connections? (?:will )?not (?:be )?accepted|access denied, (?:rejected by recipient"
        r"|please try again)|ip (?:temporarily )?blacklisted|not allowed to send|blocked -"
        r"|ip not in whitelist|on our block|over ipv6|network not allowed|client blocked"
        r"|blocked from sending",
    ),
    (
        "no_relaying",
        r"relay(?:ing)? (?:access )?(?:denied|not permitted|not allowed|prohibited)"
        r"|unable to relay|not permitted to relay|we do not relay|open relay|not a gateway"
        r"|allowed rcpthosts|relay error|relaying denied",
    ),
    ("spam_detected", r"spam|junk|unsolicited|bulk mail|content filter|scored too high"),
    (
        "policy_violation",
        r"polic(?:y|ies)|not authorized|(?:illegal|prohibited|forbidden|blocked|dangerous) attachment"
        r"|attachment (?:type|not allowed|blocked)|prohibited|not permitted|anti-spoofing"
        r"|header is too long",
    ),
    (
        "content_error",
        r"content (?:rejected|error)|no [\w-]+ field given|message content|malformed (?!address|or unexpected)|bad header"
        r"|message depth|too many related errors|invalid (?:message|header)"
        r"|received\"? headers|8-?bit (?:data|characters)|bare lf|line too long|mime (?:error|violation)",
    ),
    (
        "filtered",
        r"filtered|rejected by (?:the )?recipient|recipient (?:has )?(?:refused|rejected"
        r"|blocked) (?:your|mail|messages)|does not accept mail from you|not accepting mail from",
    ),
    (
        "has_moved",
        r"has moved|user moved|address (?:has )?changed|no longer (?:at|with) (?:this|the)",
    ),
    (
        "mailbox_disabled",
        r"disabled|discontinued|has not been collected|deactivated|suspended|inactive|(?:account|mailbox)"
        r" (?:is |has been )?(?:closed|locked|expired|frozen)|no longer (?:active|valid|in use"
        r"|available|accepts)|banned recipient|account (?:is )?unavailable",
    ),
    (
        "not_accept",
        r"does not accept (?:e-?)?mail|accepts no mail|null mx|no smtp service"
        r"|reject all mails|no host found for existing",
    ),
    (
        "host_unknown",
        r"host (?:or domain name )?not found|domain (?:name )?not found|unknown host|host unknown"
        r"|unrouteable|unroutable|no such domain|domain (?:does not|doesn't) exist|nxdomain"
        r"|name or service not known|point to non-existent|lookups failed permanently"
        r"|couldn't find any host|unknown domain|no mx|answer with no data|could not resolve"
        r"|domain is invalid|invalid domain|domain unknown|bad domain|domain is not reachable"
        r"|domain doesn'?t exist|find the recipient domain",
    ),
    (
        "mailbox_full",
        r"mailbox (?:is )?full|over (?:the )?quota|quota|mailbox size|insufficient storage"
        r"|out of storage|storage (?:space|limit|allocation)|exceeded storage|full mailbox"
        r"|mail ?box (?:has )?exceeded|mailbox exceeds|account is full|is full"
        r"|messages in recipient's mailbox exceeded|too many messages in",
    ),
    (
        "message_too_large",
        r"too (?:big|large)|size (?:limit|exceeds|exceeded)|exceeds? .{0,20}(?:maximum|size)"
        r"|message size|databytes|maximum email size|message length",
    ),
    (
        "user_unknown",
        r"user unknown|unknown (?:user|recipient|mailbox|address|local|alias)|no such"
        r"|(?:does not|doesn't|not) exist|invalid (?:recipient|mailbox|address|user|rcpt)"
        r"|mailbox (?:not found|unavailable|invalid|does not)|recipient (?:not found|unknown"
        r"|rejected|invalid|address rejected|not ok)|address rejected|not a valid|not listed"
        r"|(?:user|address|recipient|mailbox) not found|could(?:n't| not) be found"
        r"|bad (?:destination|address|recipient)|no mail ?box|not our customer|known user"
        r"|recipientnotfound|recipnotfound|address unknown|non répertorié|does not like"
        r"|(?:doesn't|does not) have an? .{0,20}account|no account|not a local address"
        r"|unknown or illegal|n'existe pas|user not known|invalid final delivery|no matches to nameserver|final (?:e-?mail )?delivery point|reserved by rfc|cannot route mail to user|no valid recipients|undeliverable address|not found in",
    ),
    (
        "expired",
        r"expired|retry time|retry timeout|could not be delivered within|too long in"
        r"|delivery time|giving up|failed \d+ attempts|did not accept our requests to connect|message delayed|has been delayed|delayed",
    ),
    (
        "network_error",
        r"connection (?:refused|timed out|reset|dropped|lost)|timed out|time-?out|network"
        r"|routing loop|loop detected|mail loop|no route|dns (?:lookup|error)|dns servers"
        r"|unable to connect|couldn't connect|lost connection|no answer from host"
        r"|unreachable|establish an smtp connection|mail exchanger|best-preference mx"
        r"|dns lookup|no (?:valid )?route|routes to destination|address family mismatch"
        r"|source address|hop count|too many hops|looping",
    ),
    (
        "syntax_error",
        r"syntax|unrecognized command|command (?:not|unrecognized)|hello first|rcpt first"
        r"|mail first|bad sequence|out of sequence|angle-brackets|expected word"
        r"|source-routed|malformed address|may not be repeated|line length",
    ),
    (
        "system_error",
        r"system|server (?:busy|error)|temporar|internal|local delivery failed|unable to"
        r"|misconfigur|incorrectly configured|not enough free space|busy|resources"
        r"|forbidden|try again|service (?:not available|unavailable)|ambiguous"
        r"|several matches|several entries|mta failure|interpreter",
    ),
]

_COMPILED = [(category, re.compile(pattern)) for category, pattern in _RULES]


def category_by_words(text: str) -> str | None:
    """The category the reply's words give (`text` lower-cased and single-spaced), or
    None when no rule matches."""
    for category, pattern in _COMPILED:
        if pattern.search(text):
            return category
    return None
