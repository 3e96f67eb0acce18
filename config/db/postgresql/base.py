"""Django's PostgreSQL backend with two changes.

**Prepared statements, for the statements that ask for it.** A statement registered
with `config.db.prepared.prepared()` (the bearer authentication, keyset list pages,
the usage increment, the SQL rate-limit counter) is prepared on its first run on a
connection: parsed and planned once, then reused; for these indexed, parameterized
statements planning costs more than running them. Every other statement runs
unprepared, as in stock Django, and PostgreSQL plans it for its actual parameters: a
prepared statement may fall back to a generic plan, which for `email_lower IN (...)`
over an account's contacts made imports four times slower, and which for a filter on
a skewed column (an enrollment status) can pick a scan the actual value would not. `DB_PREPARED_STATEMENTS=false` turns preparing off entirely (PgBouncer in
transaction mode without `max_prepared_statements`).

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
from django.db.backends.postgresql.base import ServerBindingCursor
from psycopg import pq

from config.db.prepared import is_prepared

_UNUSABLE_TRANSACTION_STATES = (pq.TransactionStatus.INERROR, pq.TransactionStatus.UNKNOWN)


class PreparingCursor(ServerBindingCursor):
    """Prepares the registered statements, and only those."""

    def execute(self, query, params=None, *, prepare=None, binary=None):
        if prepare is None:
            prepare = is_prepared(query)
        return super().execute(query, params, prepare=prepare, binary=binary)


class DatabaseWrapper(PostgreSQLDatabaseWrapper):
    def get_connection_params(self):
        params = super().get_connection_params()
        if params.get("cursor_factory") is ServerBindingCursor:
            params["cursor_factory"] = PreparingCursor
        return params

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
