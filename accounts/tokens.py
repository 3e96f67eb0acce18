"""API key tokens: `ak_live_` + 32 random bytes, URL-safe. Only the SHA-256 is kept."""

import hashlib
import secrets

TOKEN_PREFIX = "ak_live_"  # noqa: S105 (a public prefix, not a secret)
PREFIX_LENGTH = 12
# ak_live_ (8) + base64url of 32 bytes without padding (43).
TOKEN_LENGTH = len(TOKEN_PREFIX) + 43


def token_generate() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def token_is_well_formed(token: str) -> bool:
    return len(token) == TOKEN_LENGTH and token.startswith(TOKEN_PREFIX)
