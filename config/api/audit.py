"""The audit log's seam in the API plumbing (docs/audit.md, "The audit log").

Every request that changes an account's data through the API writes one row, in the
change's own transaction: the handler of a POST, PUT, PATCH or DELETE runs inside
`transaction.atomic()` (`audited_call`), and its 2xx response writes the row before the
transaction commits. An error, raised anywhere in the handler, rolls back the change and
writes nothing; a 4xx writes nothing. A handler marked `@network_first` waits on a
peer before it writes: it runs outside a transaction, and its row is written after it,
in a transaction of its own, or by the handler in the transaction of its write
(`audit_now`). An `@idempotent` handler (accounts.idempotency)
writes its row in the transaction that stores its response, so a replay, which runs no
handler, writes none.

What a row says is derived from the view (`AuditMixin`):

    action    "<resource>.<verb>": the resource is the view's `audit_resource`, else its
              model's name in snake case (ApiKey: "api_key"); the verb is the viewset
              action (create, update, delete) or the custom action's URL word
              (rotate_secret, dispatch), or the HTTP method's on a plain view.
              `audit_actions = {"<action or method>": "<resource>.<verb>" | None}` names
              one explicitly (None: the operation changes nothing, no row), and a handler
              may decide at run time with `audit_as(request, action=..., resource_id=...)`.
    resource  its type (the action's first word) and id: a create's new id (the
              response's `id`), else the URL's `<type>_id` or the view's lookup id.
    changes   the names of the request body's top-level fields; never a value.

config imports no app: accounts registers the function that writes the row, and fills
in the actor, address and ids from the request (`register_writer`, AccountsConfig.ready).
Staff changes in the admin go through the same writer (`staff_audit`, config.admin_base).
"""

import functools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from django.db import transaction

if TYPE_CHECKING:
    from rest_framework.views import APIView

    _APIViewBase = APIView
else:
    _APIViewBase = object

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_ACTION_VERBS = {"create": "create", "update": "update", "partial_update": "update"}
_ACTION_VERBS["destroy"] = "delete"
_METHOD_VERBS = {"post": "create", "put": "update", "patch": "update", "delete": "delete"}
_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")
_NOT_WORD = re.compile(r"[^a-z0-9_]+")
_UNSET: Any = object()


@dataclass(frozen=True)
class AuditRecord:
    """What a change was; the writer adds who, from where and when."""

    account_id: Any
    action: str
    resource_type: str
    resource_id: str
    changes: list[str] = field(default_factory=list)
    # "staff" rows carry the admin's user; API rows read the actor from the request.
    staff_user: Any = None


Writer = Callable[[Any, AuditRecord], object]
_writer: list[Writer] = []


def register_writer(writer: Writer) -> None:
    """The function that writes a row: `writer(request, record)`, in the open transaction."""
    _writer[:] = [writer]


def audit_as(request, *, action: str | None = _UNSET, resource_id: Any = _UNSET) -> None:
    """Names the request's row from inside its handler: another action (a drafter's send
    that becomes an approval: `action="approval.request"`), its resource's id, or
    `action=None` for a request that changed nothing."""
    override = dict(getattr(request, "audit_override", {}))
    if action is not _UNSET:
        override["action"] = action
    if resource_id is not _UNSET:
        override["resource_id"] = resource_id
    request.audit_override = override


def model_resource_type(model) -> str:
    """ApiKey -> "api_key", SmtpCredential -> "smtp_credential"."""
    return _CAMEL.sub("_", model._meta.object_name).lower()


def network_first(handler):
    """Marks a write handler that waits on a peer (an SMTP or IMAP login, DNS lookups,
    Stripe) before it writes. It runs outside a transaction: no database connection sits
    idle in one, holding its snapshot (and, behind PgBouncer in transaction mode, a server
    connection) for as long as the peer takes to answer. Its writes are transactions of
    its own, short ones, none open while the peer is asked; its audit row follows them in
    one of its own, or is written by the handler in its write's transaction (`audit_now`:
    a change never commits without its row). Under `@idempotent`, put it below (nearer
    the function)."""
    handler.network_first = True
    return handler


def is_network_first(handler) -> bool:
    return bool(getattr(handler, "network_first", False))


def audit_now(view, request, response) -> None:
    """A network_first handler writes its row itself, in the transaction of the write the
    row describes (the caller's), so the two commit together: a handler that writes
    before it waits on its peer (a mailbox stored, then checked) or after (a signup,
    once its Stripe customer exists). `response` is what the request will answer as far
    as the row reads it (its status, and a create's `id`). No row is written after the
    handler then. Under `@idempotent` with a key, the answer the key replays is stored
    in that transaction too (`response` is then the answer itself, and the handler
    does nothing after its write): a retried key finds the change made, never makes
    it twice."""
    audit_response(view, request, response)
    store = getattr(request, "idempotency_store", None)
    if store is not None:
        store(response)


def audited_call(view, handler, request, *args, **kwargs):
    """Runs a handler that writes in one transaction with its audit row (a network_first
    handler: before the transaction of its row, unless it wrote its row itself)."""
    if is_network_first(handler):
        response = handler(request, *args, **kwargs)
        if not getattr(request, "audit_written", False):
            with transaction.atomic():
                audit_response(view, request, response)
        return response
    with transaction.atomic():
        response = handler(request, *args, **kwargs)
        audit_response(view, request, response)
    return response


def audit_response(view, request, response) -> None:
    """Writes the row of a successful write request (in the caller's transaction), once:
    a request whose row is written (`audit_now`) writes no second one."""
    if not _writer or not 200 <= response.status_code < 300:
        return
    if getattr(request, "audit_written", False):
        return
    describe = getattr(view, "audit_describe", None)
    record = describe(request, response) if describe is not None else None
    if record is not None:
        _writer[0](request, record)
        request.audit_written = True


def staff_audit(request, obj, *, verb: str, changes: list[str] = ()) -> None:  # type: ignore[assignment]
    """A staff change of `obj` in the admin: one row, when `obj` belongs to an account."""
    account_id = _owner_account_id(obj)
    if not _writer or account_id is None:
        return
    resource_type = model_resource_type(type(obj))
    record = AuditRecord(
        account_id=account_id,
        action=f"{resource_type}.{verb}",
        resource_type=resource_type,
        resource_id=str(obj.pk),
        changes=sorted(changes),
        staff_user=request.user,
    )
    _writer[0](request, record)


def _owner_account_id(obj):
    """The account an admin row belongs to: itself, its `account`, or its parent's."""
    if obj._meta.model_name == "account" and obj._meta.app_label == "accounts":
        return obj.pk
    if hasattr(obj, "account_id"):
        return obj.account_id
    for parent in obj._meta.concrete_fields:
        if parent.many_to_one and hasattr(parent.related_model, "account"):
            related = getattr(obj, parent.name, None)
            if related is not None:
                return getattr(related, "account_id", None)
    return None


class AuditMixin(_APIViewBase):
    """Writes each successful write request's audit row (see the module docstring)."""

    audit_resource: str | None = None
    audit_actions: Mapping[str, str | None] = {}

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if request.method not in WRITE_METHODS:
            return
        name = request.method.lower()
        handler = getattr(self, name, None)
        # An @idempotent handler writes its row with its stored response.
        if handler is not None and not getattr(handler, "idempotent", False):
            setattr(self, name, functools.partial(audited_call, self, handler))

    def audit_resource_type(self) -> str | None:
        if self.audit_resource:
            return self.audit_resource
        queryset = getattr(self, "queryset", None)
        return model_resource_type(queryset.model) if queryset is not None else None

    def audit_describe(self, request, response) -> AuditRecord | None:
        """The row's action, resource and changes; None: nothing to write."""
        key = getattr(self, "action", None) or request.method.lower()
        override = getattr(request, "audit_override", {})
        action = override.get("action", self.audit_actions.get(key, _UNSET))
        if action is None:
            return None
        if action is _UNSET:
            resource = self.audit_resource_type()
            if resource is None:
                return None
            action = f"{resource}.{self._audit_verb(key)}"
        resource_type, _, verb = action.partition(".")
        resource_id = override.get("resource_id")
        if resource_id is None:
            resource_id = self._audit_resource_id(response, resource_type, verb)
        data = response.data if isinstance(getattr(response, "data", None), Mapping) else {}
        user = request.user
        account_id = user.pk if getattr(user, "is_authenticated", False) else None
        account_id = account_id or data.get("account_id")
        if account_id is None:
            return None
        # A resource without an id of its own (sending defaults, billing): the account's.
        resource_id = resource_id or account_id
        body = request.data
        return AuditRecord(
            account_id=account_id,
            action=action,
            resource_type=resource_type,
            resource_id=str(resource_id),
            changes=sorted(str(name) for name in body) if isinstance(body, Mapping) else [],
        )

    def _audit_verb(self, key: str) -> str:
        if key in _ACTION_VERBS:
            return _ACTION_VERBS[key]
        if key in _METHOD_VERBS:
            return _METHOD_VERBS[key]
        handler = getattr(type(self), key, None)
        url_path = getattr(handler, "url_path", key)
        return _NOT_WORD.sub("", url_path.rsplit("/", 1)[-1].lower()) or key

    def _audit_resource_id(self, response, resource_type: str, verb: str) -> str:
        data = response.data if isinstance(getattr(response, "data", None), Mapping) else {}
        kwargs = getattr(self, "kwargs", {})
        if verb == "create" and data.get("id") is not None:
            return data["id"]
        for name in (f"{resource_type}_id", getattr(self, "lookup_url_kwarg", None), "pk"):
            if name and kwargs.get(name) is not None:
                return kwargs[name]
        return data.get("id") or data.get(f"{resource_type}_id") or ""
