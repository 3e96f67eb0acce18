"""The base every authenticated resource view stands on.

Its queryset is always narrowed to the caller's account, so another account's
resource is the same 404 as one that does not exist (SPEC.md 5.4) on every
endpoint, without each view having to remember it.
"""

import uuid
from typing import TYPE_CHECKING

from rest_framework import viewsets
from rest_framework.generics import GenericAPIView

from config.api.errors import NotFoundError, ServiceError


def is_uuid(value) -> bool:
    try:
        uuid.UUID(str(value))
    except (ValueError, TypeError, AttributeError):
        return False
    return True


if TYPE_CHECKING:
    _ViewBase = GenericAPIView  # what the mixin is mixed into
else:
    _ViewBase = object


class AccountScopedMixin(_ViewBase):
    """Narrows `queryset` to `request.user` (the authenticated Account)."""

    # The field linking the model to its account.
    account_field = "account"
    # Raised for an unknown id, a malformed id, and another account's id alike.
    not_found_error: type[ServiceError] = NotFoundError

    @property
    def account(self):
        return self.request.user

    def get_queryset(self):
        return super().get_queryset().filter(**{self.account_field: self.request.user})

    def get_object(self):
        lookup = self.kwargs[self.lookup_url_kwarg or self.lookup_field]
        if not is_uuid(lookup):
            raise self.not_found_error()
        obj = self.get_queryset().filter(**{self.lookup_field: lookup}).first()
        if obj is None:
            raise self.not_found_error()
        self.check_object_permissions(self.request, obj)
        return obj


class AccountScopedViewSet(AccountScopedMixin, viewsets.GenericViewSet):
    pass


class AccountScopedAPIView(AccountScopedMixin, GenericAPIView):
    pass
