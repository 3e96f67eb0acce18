"""The bounce classifier (outreach.bounce_types) and the delivery report reader
(outreach.intake.reports) on real bounces (tests/outreach/bounce_corpus/README.md):

- Sisimai's tables of real SMTP replies per provider and MTA, each with the reason
  Sisimai gives it (mapped to our category below): the label is Sisimai's, not ours;
- flufl.bounce's real bounce messages (RFC 3464 reports and the plain-text notices of
  qmail, Exim, Sendmail, Exchange, Yahoo, GroupWise...), each failed recipient labelled
  by reading it (labels.json; the recipients are flufl.bounce's own).

A table of accuracy per type is printed (pytest -s); the floors are the accuracy reached
less a margin. Every miss is known: listed here and in docs/sending.md ("Known misses");
a new miss fails, and so does a fixed one still listed.
"""

import email
import email.policy
import json
from collections import Counter
from pathlib import Path

import pytest

from outreach.bounce_types import CATEGORIES, classify
from outreach.bounce_types.categories import SOFT, type_of
from outreach.intake.reports import delivery_report_parse, is_delivery_report

CORPUS = Path(__file__).parent / "bounce_corpus"

# Sisimai's reason -> our category (docs/sending.md, "Bounce types").
SISIMAI = {
    "userunknown": "user_unknown",
    "hostunknown": "host_unknown",
    "suspend": "mailbox_disabled",
    "hasmoved": "has_moved",
    "notaccept": "not_accept",
    "mailboxfull": "mailbox_full",
    "mesgtoobig": "message_too_large",
    "exceedlimit": "message_too_large",
    "expired": "expired",
    "systemerror": "system_error",
    "systemfull": "system_error",
    "mailererror": "system_error",
    "networkerror": "network_error",
    "syntaxerror": "syntax_error",
    "blocked": "blocked",
    "rejected": "rejected",
    "filtered": "filtered",
    "policyviolation": "policy_violation",
    "spamdetected": "spam_detected",
    "virusdetected": "virus_detected",
    "contenterror": "content_error",
    "securityerror": "security_error",
    "toomanyconn": "rate_limited",
    "norelaying": "no_relaying",
}

# Where our type differs from the label, on purpose or not (docs/sending.md).
KNOWN_MISSES = {
    # Sisimai says the recipient's filter refused; the words say the user is unknown.
    "Sisimai/Rhost/KDDI: 550 : User unknown",
    "Sisimai/Lhost/Biglobe: Mail Delivery Failed... User unknown",
    "Sisimai/Lhost/ReceivingSES: Mailbox does not exist",
    "Sisimai/Lhost/Domino: Cannot route mail to user",
    # A domain that does not exist or has no MX: we say host_unknown (hard), Sisimai a
    # network error or no relaying.
    "Sisimai/Rhost/ExchangeOnline: 5.4.4 smtpsend.dns.nonexistentdomain; nonexistent domain",
    "Sisimai/Rhost/ExchangeOnline: 5.4.4 invalid arguments",
    "Sisimai/Rhost/ExchangeOnline: 5.4.310 does not exist",
    "Sisimai/Lhost/GSuite:  responded with code NXDOMAIN",
    "Sisimai/Lhost/OpenSMTPD: No MX found for domain",
    "Sisimai/Lhost/OpenSMTPD: No MX found for destination",
    # Sisimai's "blocked" for a bad HELO domain; we read a bad recipient domain.
    "Sisimai/Rhost/ExchangeOnline: 5.5.4 invalid domain name",
    "Sisimai/Rhost/ExchangeOnline: 5.3.2 storedrv.deliver: missing or bad storedriver mdb"
    " properties",
    # Protocol errors about authentication or TLS: we say security_error (block).
    "Sisimai/Rhost/GoogleApps: 5.7.0 no identity changes permitted",
    "Sisimai/Rhost/GoogleApps: 5.7.4 unrecognized authentication type",
    "Sisimai/Rhost/GoogleApps: 5.7.0 must issue a starttls command first",
    "Sisimai/Rhost/GoogleApps: 5.5.4 optional argument not permitted for that auth mode",
    "Sisimai/Rhost/GoogleApps: 5.7.0 too many unauthenticated commands",
    # Too few words to read.
    "Sisimai/Rhost/Mimecast: submitter failed to disabled",
    "Sisimai/Lhost/MailRu: No action is required on your part",
    # Recipients the plain-text reader does not find.
    "flufl.bounce/aol_01.txt: screenname@aol.com",
    "flufl.bounce/yale_01.txt: userx@cs.yale.edu",
    "flufl.bounce/yale_01.txt: userx@yale.edu",
    # A list's moderation notice dressed as a non-delivery report.
    "flufl.bounce/microsoft_03.txt: userx@example.com",
}

# The floors: accuracy per type reached, less a margin for a future rule's side effects.
FLOORS = {"hard": 93.0, "soft": 93.0, "block": 90.0, "delay": 100.0}


def _replies() -> list[tuple[str, str, str, str, str]]:
    """(id, source, expected type, expected category, got type) per Sisimai reply."""
    rows = []
    for reply in json.loads((CORPUS / "sisimai" / "replies.json").read_text()):
        category = SISIMAI[reply["reason"]]
        text = " ".join(x for x in (reply["status"], reply["text"]) if x)
        temporary = (reply["status"] or str(reply["code"] or "5")).startswith("4")
        expected = SOFT if temporary else type_of(category)
        got = classify(code=reply["code"], text=text)
        rows.append(
            (f"{reply['source']}: {text}", reply["source"], expected, category, got.type, got)
        )
    return rows


def _message(name: str):
    raw = (CORPUS / "flufl_bounce" / name).read_bytes()
    return email.message_from_bytes(raw, policy=email.policy.compat32)


def _messages() -> list[tuple]:
    rows = []
    labels = json.loads((CORPUS / "flufl_bounce" / "labels.json").read_text())
    for label in labels:
        report = delivery_report_parse(_message(label["file"]))
        failure = report and next(
            (f for f in report.failures if label["recipient"] in f.recipients), None
        )
        if failure is None:
            got = None
        elif not failure.permanent:
            got = "delay"
        else:
            got = failure.bounce_class.type
        rows.append(
            (
                f"flufl.bounce/{label['file']}: {label['recipient']}",
                f"flufl.bounce/{label['mta']}",
                label["type"],
                label["category"],
                got,
                failure.bounce_class if failure and failure.permanent else None,
            )
        )
    return rows


@pytest.fixture(scope="module")
def corpus():
    return _replies() + _messages()


def test_the_corpus_is_large_and_varied(corpus):
    sources = Counter(row[1] for row in corpus)
    assert len(corpus) >= 300
    assert len(sources) >= 15, sources


def test_accuracy_per_type_meets_its_floor(corpus):
    total, right, category_right = Counter(), Counter(), Counter()
    for _, _, expected, category, got, klass in corpus:
        total[expected] += 1
        right[expected] += got == expected
        category_right[expected] += bool(klass and klass.category == category)
    print("\ntype   items  type-right  accuracy  category-right")
    accuracy = {}
    for kind in ("hard", "soft", "block", "delay"):
        accuracy[kind] = 100.0 * right[kind] / total[kind]
        print(
            f"{kind:6} {total[kind]:5}  {right[kind]:10}  {accuracy[kind]:7.1f}%"
            f"  {category_right[kind]:14}"
        )
    for kind, floor in FLOORS.items():
        assert accuracy[kind] >= floor, (kind, accuracy[kind])


def test_every_miss_is_known(corpus):
    misses = {row[0] for row in corpus if row[4] != row[2]}
    assert misses - KNOWN_MISSES == set(), "new misses"
    assert KNOWN_MISSES - misses == set(), "fixed: take them off the known misses"


def test_every_label_names_a_published_category(corpus):
    assert {row[3] for row in corpus if row[2] != "delay"} <= set(CATEGORIES)


@pytest.mark.parametrize("name", sorted(p.name for p in (CORPUS / "flufl_bounce").glob("*.txt")))
def test_every_message_reads_without_raising(name):
    message = _message(name)
    is_delivery_report(message)
    delivery_report_parse(message)
