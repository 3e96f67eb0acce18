"""Database plumbing shared by the apps."""

from django.db import connection


def connection_release() -> None:
    """Give this thread's database connection back to the pool before waiting on a
    peer (an SMTP reply, an HTTP response), so a worker's threads share a bounded
    number of connections. The next query borrows one again. Nothing to do without a
    pool (web processes, beat, or DB_POOL_MAX_SIZE=0), or inside a transaction, which keeps its
    connection until it ends."""
    if connection.connection is None or connection.in_atomic_block:
        return
    if connection.settings_dict.get("OPTIONS", {}).get("pool"):
        connection.close()
