"""A mailbox whose IMAP server refuses the login: the connection opened for it is
closed, not left to the garbage collector."""

import imaplib
import socket
import threading

import pytest

from outreach.mailboxes.imap import imap_connect
from outreach.models.mailboxes import Security
from tests.outreach.factories import CredentialFactory

pytestmark = pytest.mark.django_db


class RefusingImapServer:
    """Greets, answers CAPABILITY, refuses LOGIN, then records whether the client
    closed the connection (an empty read) within a few seconds."""

    def __init__(self):
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.closed_by_client = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        conn, _ = self.listener.accept()
        conn.settimeout(5)
        with conn:
            conn.sendall(b"* OK IMAP4rev1 ready\r\n")
            buffer = b""
            try:
                while True:
                    data = conn.recv(4096)
                    if not data:
                        self.closed_by_client.set()
                        return
                    buffer += data
                    while b"\r\n" in buffer:
                        line, buffer = buffer.split(b"\r\n", 1)
                        tag, _, rest = line.partition(b" ")
                        command = rest.split(b" ", 1)[0].upper()
                        if command == b"CAPABILITY":
                            conn.sendall(b"* CAPABILITY IMAP4rev1 AUTH=PLAIN\r\n")
                            conn.sendall(tag + b" OK done\r\n")
                        elif command == b"LOGIN":
                            conn.sendall(tag + b" NO [AUTHENTICATIONFAILED] wrong\r\n")
                        elif command == b"LOGOUT":
                            conn.sendall(b"* BYE\r\n" + tag + b" OK bye\r\n")
                        else:
                            conn.sendall(tag + b" BAD unknown\r\n")
            except OSError:
                return

    def close(self):
        self.listener.close()


def test_a_refused_login_closes_the_connection(account):
    server = RefusingImapServer()
    try:
        credential = CredentialFactory(
            account=account,
            imap_host="127.0.0.1",
            imap_port=server.port,
            imap_security=Security.NONE,
            imap_username="ann",
            imap_password="wrong",
        )
        try:
            imap_connect(credential)
        except imaplib.IMAP4.error as exc:
            # Held, as a caller logging it holds it: its traceback keeps the frame
            # that opened the connection alive, so only an explicit close closes it.
            error = exc
        assert "wrong" in str(error)
        assert server.closed_by_client.wait(5)
    finally:
        server.close()
