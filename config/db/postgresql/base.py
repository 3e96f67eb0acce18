"""Django's PostgreSQL backend with one change: a health check that usually costs no
round trip. (Statements are prepared by psycopg as in stock Django: prepare_threshold,
config/settings.py. This check is kept for its figure: docs/development.md, "Library
code".)

**A health check that usually costs no round trip.** With CONN_HEALTH_CHECKS, Django
checks a persistent connection before its first use in each request (and after an
error) by running `SELECT 1`: one more network round trip on every request, as
expensive as a real query. Here the check first asks the connection itself. A
connection libpq knows to be broken, or left in a failed transaction, is unusable.
An idle connection has nothing to read: when its socket has nothing, it is usable,
with no round trip. When it has something, the server sent it unasked, almost always
its goodbye before closing (a restart, an administrator shutdown,
`pg_terminate_backend`, an idle timeout): only then is `SELECT 1` run to decide.
What it cannot see, `SELECT 1` would not have seen sooner either: a peer that
vanished without closing its sockets is found out by the next query, which fails and
marks the connection for closing, as it would after a `SELECT 1` that hangs.
"""

import select

import psycopg
from django.db.backends.postgresql.base import DatabaseWrapper as PostgreSQLDatabaseWrapper
from psycopg import pq

_UNUSABLE_TRANSACTION_STATES = (pq.TransactionStatus.INERROR, pq.TransactionStatus.UNKNOWN)


def connection_usable(connection) -> bool | None:
    """True or False when the connection's own state tells; None when the server sent
    something unasked and only a query can tell."""
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
    return None if readable else True


# A pool handing out only dead connections (the server restarted) is emptied by these
# many tries; then a new connection is asked for as usual.
_POOL_CHECKS = 3


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    def get_new_connection(self, conn_params):
        """From the pool: the same check as is_usable on each connection handed out, so
        a connection the server closed while it sat in the pool is never used (Django's
        own pool check runs a query each time)."""
        connection = super().get_new_connection(conn_params)
        if self.pool is None:
            return connection
        for _ in range(_POOL_CHECKS):
            usable = connection_usable(connection)
            if usable is None:
                usable = self._answers(connection)
            if usable:
                return connection
            connection.close()
            self.pool.putconn(connection)  # the pool drops a closed connection
            connection = super().get_new_connection(conn_params)
        return connection

    @staticmethod
    def _answers(connection) -> bool:
        try:
            connection.execute("SELECT 1")
        except psycopg.Error:
            return False
        return True

    def is_usable(self) -> bool:
        usable = connection_usable(self.connection)
        if usable is None:
            return super().is_usable()  # the server said something: ask it
        return usable
