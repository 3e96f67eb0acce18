"""Django's PostgreSQL backend with a health check that usually costs no round trip.

With CONN_HEALTH_CHECKS, Django checks a persistent connection before its first
use in each request (and after an error) by running `SELECT 1`: one more network
round trip on every request, as expensive as a real query. Here the check first
asks the connection itself. A connection libpq knows to be broken, or left in a
failed transaction, is unusable. An idle connection has nothing to read: when its
socket has nothing, it is usable, with no round trip. When it has something, the
server sent it unasked, almost always its goodbye before closing (a restart, an
administrator shutdown, `pg_terminate_backend`, an idle timeout): only then is
`SELECT 1` run to decide.

What it cannot see, `SELECT 1` would not have seen sooner either: a peer that
vanished without closing its sockets is found out by the next query, which fails
and marks the connection for closing, as it would after a `SELECT 1` that hangs.
"""

import select

import psycopg
from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLDatabaseWrapper
from psycopg import pq

_UNUSABLE_TRANSACTION_STATES = (pq.TransactionStatus.INERROR, pq.TransactionStatus.UNKNOWN)


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    def is_usable(self) -> bool:
        connection = self.connection
        if connection is None or connection.closed:
            return False
        pgconn = connection.pgconn
        try:
            if pgconn.status != pq.ConnStatus.OK:
                return False
            if pgconn.transaction_status in _UNUSABLE_TRANSACTION_STATES:
                return False
            readable, _, _ = select.select([pgconn.socket], [], [], 0)
        except (psycopg.Error, OSError, ValueError):
            return False
        if not readable:
            return True
        return super().is_usable()  # the server said something: ask it
