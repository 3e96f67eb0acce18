"""Made-up DNS names, and a record of the connections the service attempts.

Fixture `fake_dns`: answers for made-up names; everything else goes to the real
resolver. `fake_dns.answers[name]` is a list of lookups' answers, consumed one lookup
at a time (the last one repeats); an answer is a comma-separated list of addresses.
`fake_dns.lookups` lists the names looked up.

Fixture `connect_attempts`: every TCP connect made through `socket.create_connection`
(the outbound guard's, smtplib's, imaplib's and urllib3's all use it, or the same
`socket.socket.connect`), recorded as (address, port) and then made as usual.
"""

import socket

import pytest


class FakeDns:
    def __init__(self):
        self.answers: dict[str, list[str]] = {}
        self.lookups: list[str] = []


@pytest.fixture
def fake_dns(monkeypatch):
    real = socket.getaddrinfo
    dns = FakeDns()

    def getaddrinfo(host, port, *args, **kwargs):
        if host not in dns.answers:
            return real(host, port, *args, **kwargs)
        dns.lookups.append(host)
        queue = dns.answers[host]
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        return [
            (socket.AF_INET6 if ":" in a else socket.AF_INET, socket.SOCK_STREAM, 6, "", (a, port))
            for a in answer.split(",")
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return dns


@pytest.fixture
def connect_attempts(monkeypatch) -> list[tuple[str, int]]:
    attempts: list[tuple[str, int]] = []
    real = socket.socket.connect

    def connect(self, address):
        if self.family in (socket.AF_INET, socket.AF_INET6):
            attempts.append((address[0], address[1]))
        return real(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    return attempts
