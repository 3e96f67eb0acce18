"""Bearer API key authentication.

`Authorization: Bearer ak_live_...` → SHA-256 → one indexed lookup → account.
Unknown, malformed and revoked keys get the same invalid_api_key answer, so
nothing can be learned by probing.
"""

from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed

from accounts.models import ApiKey
from accounts.services import api_request_record
from accounts.tokens import token_hash, token_is_well_formed

INVALID_KEY_MESSAGE = "The API key is not valid."


class ApiKeyAuthentication(BaseAuthentication):
    keyword = "Bearer"

    def authenticate(self, request):
        parts = get_authorization_header(request).split()
        if not parts or parts[0].lower() != b"bearer":
            return None  # No bearer credentials: authentication_required.
        if len(parts) != 2:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE, code="invalid_api_key")
        try:
            token = parts[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE, code="invalid_api_key") from None
        if not token_is_well_formed(token):
            raise AuthenticationFailed(INVALID_KEY_MESSAGE, code="invalid_api_key")
        key = (
            ApiKey.objects.select_related("account__plan")
            .filter(key_hash=token_hash(token), revoked_at__isnull=True)
            .first()
        )
        if key is None:
            raise AuthenticationFailed(INVALID_KEY_MESSAGE, code="invalid_api_key")
        now = timezone.now()
        ApiKey.objects.filter(pk=key.pk).update(last_used_at=now)
        key.last_used_at = now
        api_request_record(api_key=key, at=now)
        return (key.account, key)

    def authenticate_header(self, request):
        return self.keyword
