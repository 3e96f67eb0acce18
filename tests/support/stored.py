"""What the database holds, read past the model fields (an EncryptedTextField reads
back the plaintext; the column holds the Fernet token)."""

from django.db import connection


def stored_value(instance, field: str):
    """The column of `instance`'s `field`, as stored."""
    meta = type(instance)._meta
    quote = connection.ops.quote_name
    pk = meta.pk.get_db_prep_value(instance.pk, connection)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT {quote(meta.get_field(field).column)} FROM {quote(meta.db_table)} "  # noqa: S608
            f"WHERE {quote(meta.pk.column)} = %s",
            [pk],
        )
        return cursor.fetchone()[0]
