from dataclasses import dataclass

from accounts.models import Account, ApiKey
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
