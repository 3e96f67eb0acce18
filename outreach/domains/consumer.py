"""Consumer mail domains: a reply from one never stops other contacts at the same
domain (outreach.campaigns.stopping), and sends to one are never capped
(outreach.domain_cap)."""

# Mailbox providers whose addresses belong to people, not companies: a reply from one
# of them never stops other contacts at the same domain. Lower case, exact domains.
CONSUMER_MAIL_DOMAINS = frozenset(
    {
        # Google
        "gmail.com",
        "googlemail.com",
        # Microsoft
        "outlook.com",
        "outlook.fr",
        "outlook.de",
        "hotmail.com",
        "hotmail.co.uk",
        "hotmail.fr",
        "hotmail.de",
        "hotmail.it",
        "hotmail.es",
        "live.com",
        "live.co.uk",
        "live.fr",
        "msn.com",
        # Yahoo and AOL
        "yahoo.com",
        "yahoo.co.uk",
        "yahoo.fr",
        "yahoo.de",
        "yahoo.es",
        "yahoo.it",
        "yahoo.co.jp",
        "yahoo.com.br",
        "ymail.com",
        "rocketmail.com",
        "aol.com",
        "aim.com",
        # Apple
        "icloud.com",
        "me.com",
        "mac.com",
        # Privacy-focused
        "proton.me",
        "protonmail.com",
        "pm.me",
        "tutanota.com",
        "tuta.io",
        "hey.com",
        "fastmail.com",
        "zoho.com",
        # Europe
        "gmx.com",
        "gmx.de",
        "gmx.net",
        "gmx.at",
        "gmx.ch",
        "web.de",
        "t-online.de",
        "freenet.de",
        "orange.fr",
        "wanadoo.fr",
        "free.fr",
        "laposte.net",
        "sfr.fr",
        "libero.it",
        "virgilio.it",
        "seznam.cz",
        "wp.pl",
        "o2.pl",
        "interia.pl",
        "btinternet.com",
        "sky.com",
        "virginmedia.com",
        # Russia and Asia
        "mail.ru",
        "bk.ru",
        "inbox.ru",
        "list.ru",
        "yandex.ru",
        "yandex.com",
        "rambler.ru",
        "qq.com",
        "163.com",
        "126.com",
        "sina.com",
        "naver.com",
        "daum.net",
        "hanmail.net",
        "rediffmail.com",
        # North and South America
        "comcast.net",
        "verizon.net",
        "att.net",
        "sbcglobal.net",
        "cox.net",
        "charter.net",
        "bellsouth.net",
        "shaw.ca",
        "rogers.com",
        "uol.com.br",
        "bol.com.br",
    }
)


def is_consumer_domain(domain: str) -> bool:
    return domain.lower() in CONSUMER_MAIL_DOMAINS
