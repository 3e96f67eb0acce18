# The stored response body becomes an EncryptedTextField: the same Fernet token
# (its plaintext is the body's UTF-8 bytes), kept as text instead of bytes. The
# data step copies each token as it is, so it needs no key and decrypts nothing.

from django.db import migrations

import config.crypto

BATCH = 500


def _copy(apps, schema_editor, source: str, target: str, convert) -> None:
    """Copies every non-empty token of `source` into `target`, through convert(),
    BATCH rows at a time in primary key order."""
    Record = apps.get_model("accounts", "IdempotencyRecord")
    connection = schema_editor.connection
    quote = connection.ops.quote_name
    table, pk = quote(Record._meta.db_table), quote(Record._meta.pk.column)
    select = f"SELECT {pk}, {quote(source)} FROM {table} WHERE {pk} > %s ORDER BY {pk} LIMIT %s"  # noqa: S608
    update = f"UPDATE {table} SET {quote(target)} = %s WHERE {pk} = %s"  # noqa: S608
    last = 0
    with connection.cursor() as cursor:
        while True:
            cursor.execute(select, [last, BATCH])
            rows = cursor.fetchall()
            if not rows:
                return
            last = rows[-1][0]
            changes = [(convert(token), key) for key, token in rows if token]
            if changes:
                cursor.executemany(update, changes)


def bytes_to_text(apps, schema_editor):
    _copy(apps, schema_editor, "response_body_encrypted", "response_body", _ascii_text)


def text_to_bytes(apps, schema_editor):
    _copy(apps, schema_editor, "response_body", "response_body_encrypted", str.encode)


def _ascii_text(token) -> str:
    return bytes(token).decode("ascii")  # memoryview (PostgreSQL) or bytes (SQLite)


class Migration(migrations.Migration):
    dependencies = [
        ("accounts", "0004_keyset_page_indexes"),
    ]

    operations = [
        migrations.AddField(
            model_name="idempotencyrecord",
            name="response_body",
            field=config.crypto.EncryptedTextField(blank=True, default="", editable=False),
        ),
        migrations.RunPython(bytes_to_text, text_to_bytes),
        migrations.RemoveField(
            model_name="idempotencyrecord",
            name="response_body_encrypted",
        ),
    ]
