from dataclasses import dataclass
from datetime import datetime

from django.db import connection

from accounts.models import Account, ApiKey, ApiRequestCount
from accounts.tokens import PREFIX_LENGTH, token_generate, token_hash


@dataclass(frozen=True)
class IssuedKey:
    api_key: ApiKey
    plaintext: str  # Shown once, in the creation response; never stored.


def api_key_create(
    *, account: Account, label: str = "", client_kind: str = ApiKey.ClientKind.DIRECT
) -> IssuedKey:
    plaintext = token_generate()
    api_key = ApiKey.objects.create(
        account=account,
        prefix=plaintext[:PREFIX_LENGTH],
        key_hash=token_hash(plaintext),
        label=label,
        client_kind=client_kind,
    )
    return IssuedKey(api_key=api_key, plaintext=plaintext)


def api_request_record(*, api_key: ApiKey, at: datetime) -> None:
    """Count one authenticated request: one upsert, exact under concurrency."""
    table = ApiRequestCount._meta.db_table
    hour = at.replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (account_id, client_kind, hour, count) VALUES (%s, %s, %s, 1) "  # noqa: S608 (table name is ours)
            "ON CONFLICT (account_id, hour, client_kind) DO UPDATE SET count = "
            f"{table}.count + 1",
            [
                Account._meta.pk.get_db_prep_value(api_key.account_id, connection),
                api_key.client_kind,
                connection.ops.adapt_datetimefield_value(hour),
            ],
        )
