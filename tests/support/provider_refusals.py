"""The refusals the major mailbox providers give, in their own words, for the SMTP sink
(tests/support/smtp.py: `sink.reject_rcpt(address, GMAIL_UNAUTHENTICATED)`), and the MX
records of their hosted domains for the DNS test server (tests/support/dns_server.py).

Multi-line replies keep their continuation lines ("550-5.7.26 ..."), as the providers
send them; smtplib joins them with newlines.
"""

# Gmail: a sender without SPF or DKIM (enforced since February 2024).
GMAIL_UNAUTHENTICATED = "\r\n".join(
    [
        "550-5.7.26 This mail has been blocked because the sender is unauthenticated. Gmail",
        "550-5.7.26 requires all senders to authenticate with either SPF or DKIM.",
        "550-5.7.26",
        "550-5.7.26  Authentication results:",
        "550-5.7.26  DKIM = did not pass",
        "550-5.7.26  SPF [sender.example] with ip: [192.0.2.10] = did not pass",
        "550-5.7.26",
        "550-5.7.26  For instructions on setting up authentication, go to",
        "550 5.7.26  https://support.google.com/mail/answer/81126#authentication"
        " a640c23a62f3a-test.12 - gsmtp",
    ]
)

# Gmail: a rate limit for unsolicited mail (a temporary refusal).
GMAIL_RATE_LIMITED = "\r\n".join(
    [
        "421-4.7.28 [192.0.2.10      15] Gmail has detected an unusual rate of unsolicited",
        "421-4.7.28 mail originating from your IP address. To protect our users from spam,",
        "421-4.7.28 mail sent from your IP address has been temporarily rate limited.",
        "421-4.7.28 For more information, go to",
        "421-4.7.28  https://support.google.com/mail/?p=UnsolicitedRateLimitError to",
        "421 4.7.28 review our Bulk Email Senders Guidelines. a640c23a62f3a-test.12 - gsmtp",
    ]
)

# Outlook.com: a sending domain below the required authentication level (May 2025).
OUTLOOK_UNAUTHENTICATED = (
    "550 5.7.515 Access denied, sending domain [SENDER.EXAMPLE] does not meet the required "
    "authentication level. The sender's domain in the 5322.From address doesn't meet the "
    "authentication requirements defined for the sender. To learn more, go to "
    "https://aka.ms/AuthRequirements"
)

# Outlook.com: the sending IP's reputation (a temporary refusal).
OUTLOOK_RATE_LIMITED = (
    "451 4.7.650 The mail server [192.0.2.10] has been temporarily rate limited due to IP "
    "reputation. For e-mail delivery information, see https://aka.ms/postmaster (S775) "
    "[Name=Protocol Filter Agent][AGT=PFA][MxId=11BA0C4F3B8A6C21] "
    "[DB5EUR03FT030.eop-EUR03.prod.protection.outlook.com]"
)

# MX records of domains hosted by each provider (their published host names).
PROVIDER_MX = {
    "google": ["1 aspmx.l.google.com.", "5 alt1.aspmx.l.google.com."],
    "microsoft": ["0 {label}.mail.protection.outlook.com."],
    "yahoo": ["1 mta5.am0.yahoodns.net.", "1 mta6.am0.yahoodns.net."],
    "apple": ["10 mx01.mail.icloud.com.", "10 mx02.mail.icloud.com."],
    "other": ["10 mx.{domain}."],
}


def provider_zone(server, domain: str, provider: str) -> None:
    """`domain`'s MX records on the DNS test server, as `provider` hosts them."""
    label = domain.replace(".", "-")
    for record in PROVIDER_MX[provider]:
        server.add(domain, "MX", record.format(label=label, domain=domain))
