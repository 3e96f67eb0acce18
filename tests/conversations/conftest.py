"""The real IMAP server of the intake tests (tests/intake/conftest.py), for the
conversation tests that deliver messages by APPEND."""

from tests.intake.conftest import dovecot_server, imap_mailbox

__all__ = ["dovecot_server", "imap_mailbox"]
