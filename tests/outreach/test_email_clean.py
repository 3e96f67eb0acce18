"""email_clean answers what the email-validator library answers, address for address:
its fast path for dot-atom local parts (the domain checked once) included."""

import random
import string

import pytest
from email_validator import EmailNotValidError, validate_email

from outreach.emails import InvalidEmail, email_clean

DOMAINS = [
    "example.com",
    "EXAMPLE.org",
    "Sub.Example.CoM",
    "mail.co.uk",
    "exa_mple.com",
    "ex..ample.com",
    ".example.com",
    "example.com.",
    "-bad.com",
    "bad-.com",
    "localhost",
    "x.local",
    "x.test",
    "example.invalid",
    "example.arpa",
    "x.onion",
    "123.456",
    "1.2.3.4",
    "[1.2.3.4]",
    "example",
    "ex ample.com",
    "xn--bcher-kva.example",
    "bücher.example",
    "BÜCHER.de",
    "ß.de",
    "a" * 63 + ".com",
    "a" * 64 + ".com",
    ("a" * 60 + ".") * 4 + "com",
]
LOCALS = [
    "john",
    "John.Doe",
    "PostMaster",  # RFC 2142's role mailboxes: lower case
    "nOC",
    "x+tag",
    "o'reilly",
    "!#$%&'*+/=?^_`{|}~-",
    "a..b",
    ".a",
    "a.",
    '"quoted local"',
    "tést",
    "a b",
    "a" * 64,
    "a" * 65,
    "user@host",
    "",
    "ü",
]


def _library(value: str) -> str:
    try:
        result = validate_email(value.strip(), check_deliverability=False)
    except EmailNotValidError:
        return "refused"
    return result.normalized if len(result.normalized) <= 254 else "refused"


def _ours(value: str) -> str:
    try:
        return email_clean(value)
    except InvalidEmail:
        return "refused"


# The random local parts and domains drawn: the same on every run, so a failure
# reproduces (as the suite's property and fuzz tests are derandomized). Another seed
# draws another 1,500 locals.
SEED = 20261105


def test_the_same_verdict_and_form_as_the_library():
    rng = random.Random(SEED)
    atext = string.ascii_letters + string.digits + "!#$%&'*+/=?^_`{|}~-"
    locals_ = LOCALS + [
        "".join(rng.choice(atext + "..") for _ in range(rng.randint(1, 14))) for _ in range(1500)
    ]
    compared = 0
    for local in locals_:
        for domain in rng.sample(DOMAINS, 4):
            for value in (f"{local}@{domain}", f" {local}@{domain}\t"):
                assert _ours(value) == _library(value), value
                compared += 1
    assert compared > 12_000


@pytest.mark.parametrize("value", [None, 42, "", "   "])
def test_nothing_is_refused_with_a_message(value):
    with pytest.raises(InvalidEmail, match="An email address is required."):
        email_clean(value)


def test_a_refusal_keeps_the_library_s_words():
    with pytest.raises(InvalidEmail, match="special-use or reserved name"):
        email_clean("someone@x.local")
