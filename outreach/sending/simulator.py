"""The mailbox simulator's SMTP server: what a simulator mailbox's batch talks to instead
of a connection (docs/sandbox.md). The batch decides once, from its mailbox, which one
it talks to (outreach.sending.batch); a real mailbox's batch never comes here. It speaks
smtplib's client interface, so the real transaction
(outreach.sending.smtp.smtp_transaction) and the real handling of its outcomes run
unchanged; only the server's answers are made here, by recipient
(outreach.emails.simulator_outcome):

- `bounce`: 550 5.1.1 at RCPT; `block`: 550 5.7.1 at RCPT;
- `softbounce`: 452 4.2.2 at RCPT on the step's first attempt, accepted at the next;
- `unknown`: the whole message is taken and the final dot never answered;
- anything else (and any address that is not the simulator's): accepted.

Nothing here opens a socket: smtplib's own methods that would (connect, starttls,
login) are refused, and the ones the transaction uses are answered in memory. After a
message is accepted and recorded, `outcome_on_commit` hands the outcomes that happen
after the SMTP stage (an open, a reply, a delivery report...) to the task that plays
them."""

import functools
import logging
import smtplib

from celery import current_app
from django.db import transaction

from outreach.emails import simulator_outcome
from outreach.models.mailboxes import SmtpCredential
from outreach.models.sending import Message

logger = logging.getLogger(__name__)

# The answers, as a real server words them (the code, then the text smtplib gives).
BOUNCE_REPLY = (550, b"5.1.1 The email account that you tried to reach does not exist")
BLOCK_REPLY = (550, b"5.7.1 Message refused: the sender is blocked")
SOFTBOUNCE_REPLY = (452, b"4.2.2 Mailbox full, try again later")
ACCEPTED_REPLY = (250, b"2.0.0 Ok: queued by the mailbox simulator")

# Outcomes complete at the SMTP stage: nothing follows the accepted (or refused) send.
SMTP_STAGE_OUTCOMES = frozenset({"delivered", "bounce", "softbounce", "block", "unknown"})

# A real mailbox's message to a simulator address (every way in refuses one; the
# batch's check is the last guard): failed, never handed to the mailbox's server.
SIMULATOR_ADDRESS_REFUSED = (
    "The address is the mailbox simulator's (simulator.test): a real mailbox never sends to it."
)

# The task that plays the outcomes after a simulated message is accepted, by name.
OUTCOME_TASK = "outreach.simulator_outcome"


class SimulatedSMTP(smtplib.SMTP):
    """An SMTP "connection" of a simulator mailbox, answered in memory. `attempt` is the
    number of the step's attempt being made (1 for the first); the batch sets it before
    each message (a `softbounce` is refused only at the first)."""

    def __init__(self, credential: SmtpCredential) -> None:
        # No host: smtplib connects nothing; a local name given: it looks nothing up.
        super().__init__(local_hostname="simulator.test")
        self.credential_id = credential.pk
        self.attempt = 1
        self._recipient = ""
        self._await_dot = False
        self.does_esmtp = True
        self.esmtp_features = {"size": "", "8bitmime": "", "smtputf8": "", "pipelining": ""}

    # --- what the transaction uses ----------------------------------------------------

    def ehlo_or_helo_if_needed(self) -> None:
        self.ehlo_resp = b"simulator.test"

    def ehlo(self, name: str = "") -> tuple[int, bytes]:
        self.ehlo_resp = b"simulator.test"
        return 250, self.ehlo_resp

    def mail(self, sender: str, options=()) -> tuple[int, bytes]:
        self._recipient = ""
        return 250, b"2.1.0 Ok"

    def rcpt(self, recip: str, options=()) -> tuple[int, bytes]:
        outcome = simulator_outcome(recip)
        if outcome == "bounce":
            return BOUNCE_REPLY
        if outcome == "block":
            return BLOCK_REPLY
        if outcome == "softbounce" and self.attempt <= 1:
            return SOFTBOUNCE_REPLY
        self._recipient = recip
        return 250, b"2.1.5 Ok"

    def rset(self) -> tuple[int, bytes]:
        self._recipient = ""
        self._await_dot = False
        return 250, b"2.0.0 Ok"

    def putcmd(self, cmd: str, args: str = "") -> None:
        if cmd.lower() != "data":
            raise smtplib.SMTPServerDisconnected(
                "the mailbox simulator speaks only MAIL, RCPT, DATA"
            )
        self._await_dot = False

    def getreply(self) -> tuple[int, bytes]:
        if not self._await_dot:
            self._await_dot = True
            return 354, b"End data with <CR><LF>.<CR><LF>"
        self._await_dot = False
        if simulator_outcome(self._recipient) == "unknown":
            # The final dot is never answered: the connection is gone.
            raise smtplib.SMTPServerDisconnected("Connection unexpectedly closed")
        return ACCEPTED_REPLY

    def send(self, s) -> None:
        """The message itself: taken whole (nothing is kept; the record keeps it)."""

    def noop(self) -> tuple[int, bytes]:
        return 250, b"2.0.0 Ok"

    def quit(self) -> tuple[int, bytes]:
        self.close()
        return 221, b"2.0.0 Bye"

    def close(self) -> None:
        self._recipient = ""
        self._await_dot = False

    # --- what would reach a network: refused ------------------------------------------

    def connect(self, host="localhost", port=0, source_address=None):
        raise smtplib.SMTPServerDisconnected("a simulator mailbox never connects")

    def starttls(self, *args, **kwargs):
        raise smtplib.SMTPNotSupportedError("a simulator mailbox never connects")

    def login(self, *args, **kwargs):
        raise smtplib.SMTPNotSupportedError("a simulator mailbox never connects")


def outcome_on_commit(*, message_id: str, to_email: str) -> None:
    """After a simulator mailbox's message was recorded: its later outcome queued once
    the record commits (outcome_enqueue)."""
    transaction.on_commit(
        functools.partial(outcome_enqueue, message_id=message_id, to_email=to_email),
        robust=True,
    )


def outcome_enqueue(*, message_id: str, to_email: str) -> None:
    """Queue the outcome of an accepted simulated message that happens after the SMTP
    stage (the task plays it through the real services) with the Message's primary key,
    by the task's name. Called once the message's record committed. Never raises: the
    send is recorded whatever the broker does."""
    if simulator_outcome(to_email) in (None, *SMTP_STAGE_OUTCOMES):
        return
    message_pk = Message.objects.filter(message_id=message_id).values_list("pk", flat=True).first()
    if message_pk is None:  # not recorded (the claim was taken back meanwhile)
        return
    try:
        current_app.signature(OUTCOME_TASK).apply_async((str(message_pk),), retry=False)
    except Exception:
        logger.warning("simulated outcome of message %s not queued", message_pk, exc_info=True)
