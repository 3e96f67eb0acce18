"""A Redis server for the tests of the Redis code paths (the rate limiter's Lua script,
shared by several processes): REDIS_URL's when it is set (CI runs a real Redis), else one
this test process starts itself on loopback: fakeredis's Redis-protocol TCP server (Lua
through lupa) in a subprocess, stopped when the test process ends.

    def test_it(redis_url, settings):
        settings.REDIS_URL = redis_url
"""

import subprocess
import sys

import pytest

from tests.support.ports import free_port, wait_for_port

SERVER = """
import sys
from fakeredis import TcpFakeServer

server = TcpFakeServer(("127.0.0.1", int(sys.argv[1])), server_type="redis")
server.daemon_threads = True
server.serve_forever()
"""


@pytest.fixture(scope="session")
def redis_url():
    from django.conf import settings

    if settings.REDIS_URL:
        yield settings.REDIS_URL
        return
    port = free_port()
    process = subprocess.Popen([sys.executable, "-c", SERVER, str(port)])
    try:
        wait_for_port(port, timeout=30, process=process)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        process.terminate()
        process.wait(timeout=10)
