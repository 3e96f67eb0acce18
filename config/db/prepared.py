"""The statements that run as prepared statements on PostgreSQL (config/db/postgresql).

Register fixed, parameterized statements that run on every request or every message
and whose plan does not depend on their values. Every distinct text registered is
kept, prepared, by each connection that runs it (psycopg keeps at most 100, dropping
the least recently used), so never register text built from data.
"""

_statements: set[str] = set()


def prepared(sql: str) -> str:
    """Register `sql` (as passed to cursor.execute) to be prepared; returns it."""
    _statements.add(sql)
    return sql


def is_prepared(sql: str) -> bool:
    return sql in _statements
