"""Bearer API key authentication.

`Authorization: Bearer ak_live_...` → SHA-256 → one indexed lookup → account.
Unknown, malformed, revoked and expired keys (past their `expires_at`) get the same
invalid_api_key answer, so nothing can be learned by probing.

Every authenticated request also sets the key's last_used_at (a single UPDATE)
and counts the request for the usage view (ApiRequestCount, one upsert). The
lookup, the UPDATE and the upsert are one statement (one round trip).

The statement commits like every other write (the server's synchronous_commit):
last_used_at and request counts are data too, and survive a server crash.
"""

import functools

from django.db import connection
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from accounts.models import Account, ApiKey, ApiRequestCount
from accounts.tokens import token_hash, token_is_well_formed
from plans.models import Plan

INVALID_KEY_MESSAGE = "The API key is not valid."


def _columns(model, alias: str) -> list[str]:
    quote = connection.ops.quote_name
    return [f"{alias}.{quote(f.column)}" for f in model._meta.concrete_fields]


def _attnames(model) -> list[str]:
    return [f.attname for f in model._meta.concrete_fields]


@functools.cache
def _statement() -> tuple[str, list[str], list[str], list[str]]:
    """The statement and the attribute names of its columns, built once per process."""
    key_table = ApiKey._meta.db_table
    count_table = ApiRequestCount._meta.db_table
    key_columns = ", ".join(_columns(ApiKey, key_table))
    sql = (
        f"WITH k AS (UPDATE {key_table} SET last_used_at = %s "  # noqa: S608 (our tables)
        "WHERE key_hash = %s AND revoked_at IS NULL "
        f"AND (expires_at IS NULL OR expires_at > %s) RETURNING {key_columns}), "
        f"c AS (INSERT INTO {count_table} (account_id, client_kind, hour, count) "
        "SELECT k.account_id, k.client_kind, %s, 1 FROM k "
        "ON CONFLICT (account_id, hour, client_kind) "
        f"DO UPDATE SET count = {count_table}.count + 1) "
        f"SELECT {', '.join(_columns(ApiKey, 'k') + _columns(Account, 'a') + _columns(Plan, 'p'))} "
        f"FROM k JOIN {Account._meta.db_table} a ON a.id = k.account_id "
        f"JOIN {Plan._meta.db_table} p ON p.id = a.plan_id"
    )
    return sql, _attnames(ApiKey), _attnames(Account), _attnames(Plan)


def _key_authenticate(digest: str, now) -> ApiKey | None:
    """Lookup, last_used_at and the request count in one statement."""
    sql, key_names, account_names, plan_names = _statement()
    hour = now.replace(minute=0, second=0, microsecond=0)
    with connection.cursor() as cursor:
        cursor.execute(sql, [now, digest, now, hour])
        row = cursor.fetchone()
    if row is None:
        return None
    n_key, n_account = len(key_names), len(account_names)
    db = connection.alias
    key = ApiKey.from_db(db, key_names, row[:n_key])
    account = Account.from_db(db, account_names, row[n_key : n_key + n_account])
    account.plan = Plan.from_db(db, plan_names, row[n_key + n_account :])
    key.account = account
    return key


def _failure(request) -> AuthenticationFailed:
    """Count a failed authentication against the client's IP; over the limit the
    answer is 429 rather than 401 (accounts.throttling.auth_failures_check)."""
    from accounts.throttling import auth_failure_count

    auth_failure_count(request)
    return AuthenticationFailed(INVALID_KEY_MESSAGE, code="invalid_api_key")


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None  # No bearer credentials: authentication_required.
        from accounts.throttling import auth_failures_check

        # An IP over the failed-authentication limit is refused before any lookup,
        # so a correct guess answers like a wrong one.
        auth_failures_check(request)
        if len(parts) != 2:
            raise _failure(request)
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise _failure(request) from None
        if not token_is_well_formed(token):
            raise _failure(request)
        now = timezone.now()
        key = _key_authenticate(token_hash(token), now)
        if key is None:
            raise _failure(request)
        return (key.account, key)

    def authenticate_header(self, request):
        return self.keyword
