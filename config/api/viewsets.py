"""The bases every API view stands on.

Every view adds the rate limit's headers (RateLimit-Policy, RateLimit) its throttles
decided on: ServiceAPIView, and the account-scoped bases below, which also narrow
their queryset to the caller's account, so another account's resource is the same
404 as one that does not exist on every endpoint, without each view
having to remember it. Every one of them checks the key's role against the operation's
(config.api.roles) before the handler, or the id, is looked at, and writes the audit row
of each write request that succeeds, in the request's transaction (config.api.audit).
"""

from collections.abc import Mapping
from typing import TYPE_CHECKING

from rest_framework import viewsets
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import IsAuthenticated
from rest_framework.views import APIView

from config.api.audit import AuditMixin
from config.api.errors import NotFoundError, ServiceError, ValidationFailed
from config.api.ids import is_uuid
from config.api.roles import KeyRolePermission
from config.api.serializers import UNKNOWN_FIELD

# Every authenticated view: a key, and a role its operation allows (config.api.roles).
KEY_PERMISSIONS = [IsAuthenticated, KeyRolePermission]

if TYPE_CHECKING:  # what the mixins are mixed into
    _APIViewBase = APIView
    _ViewBase = GenericAPIView
else:
    _APIViewBase = _ViewBase = object


class RateLimitHeadersMixin(_APIViewBase):
    """Adds the headers of the rate limit the request went through to the response,
    successes and errors alike. A throttle that limits the request keeps its decision
    in `decision` (an object with `headers()`, accounts.ratelimit.RateLimitDecision);
    the last throttle that decided, decides. A 429 carries its own headers too
    (RateLimited.headers), for the limits checked before the throttles run."""

    def get_throttles(self):
        self.throttles_checked = super().get_throttles()
        return self.throttles_checked

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        decisions = [getattr(t, "decision", None) for t in getattr(self, "throttles_checked", [])]
        decision = next((d for d in reversed(decisions) if d is not None), None)
        if decision is not None:
            for name, value in decision.headers().items():
                response[name] = value
        return response


def no_request_body(handler):
    """Marks a view method (or viewset action) that takes no request body: a body with
    fields is refused like any unknown field (StrictBodyMixin). Put it above the
    other decorators."""
    handler.no_request_body = True
    return handler


class StrictBodyMixin(_APIViewBase):
    """Bodies on endpoints that take none: each field is `validation_failed`,
    "Unknown field." (as the serializers refuse theirs, config.api.serializers), after
    authentication and before the handler runs."""

    # Set when the check waits for the object to be found (AccountScopedMixin.get_object):
    # another account's id is a 404 before anything is said about the body.
    body_check_pending = False

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        handler = getattr(self, request.method.lower(), None)
        if not getattr(handler, "no_request_body", False):
            return
        if isinstance(self, AccountScopedMixin) and self.lookup_url_kwarg_value() is not None:
            self.body_check_pending = True
            return
        self.body_refuse()

    def body_refuse(self) -> None:
        """validation_failed for a body on an endpoint that takes none."""
        self.body_check_pending = False
        data = self.request.data
        if isinstance(data, Mapping):
            if data:
                raise ValidationFailed({str(name): [UNKNOWN_FIELD] for name in data})
        elif data:
            raise ValidationFailed({"non_field_errors": ["This endpoint takes no request body."]})


class ServiceAPIView(AuditMixin, StrictBodyMixin, RateLimitHeadersMixin, APIView):
    permission_classes = KEY_PERMISSIONS


class AccountScopedMixin(_ViewBase):
    """Narrows `queryset` to `request.user` (the authenticated Account), after the key's
    role was checked (KEY_PERMISSIONS)."""

    permission_classes = KEY_PERMISSIONS

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
        if getattr(self, "body_check_pending", False):
            StrictBodyMixin.body_refuse(self)  # type: ignore[arg-type]  # mixed in beside it
        return obj

    def lookup_url_kwarg_value(self):
        """The id in the URL, or None on a list route."""
        return self.kwargs.get(self.lookup_url_kwarg or self.lookup_field)


class AccountScopedViewSet(
    AuditMixin, AccountScopedMixin, StrictBodyMixin, RateLimitHeadersMixin, viewsets.GenericViewSet
):
    pass


class AccountScopedAPIView(
    AuditMixin, AccountScopedMixin, StrictBodyMixin, RateLimitHeadersMixin, GenericAPIView
):
    pass
