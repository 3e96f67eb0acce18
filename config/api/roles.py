"""What each API key role may do: the one table of the API's operations and the role
each needs, and the permission every API view checks it with (docs/accounts.md,
"Roles").

The roles are ordered, each allowed what the one before it is:

    reader < drafter < sender < admin

A reader reads (every GET) and uses the previews that write nothing; a drafter writes
too, but what would email people becomes an approval; a sender sends and decides
approvals; an admin also manages keys, webhook secrets and billing and reads the audit
log. An operation's rule is its method's (safe methods: reader, the others: drafter)
unless EXCEPTIONS says otherwise; every operation is named in the table all the same,
and one it does not name needs admin (fail closed) until it is added.

The role is checked before the id is looked up: an operation the key's role may never
do is 403 insufficient_role whatever the id, so a refused key learns nothing of which
ids exist.
"""

from functools import cache

from rest_framework.permissions import SAFE_METHODS, BasePermission

from config.api.errors import InsufficientRole

READER, DRAFTER, SENDER, ADMIN = "reader", "drafter", "sender", "admin"
ROLES = (READER, DRAFTER, SENDER, ADMIN)  # in order: each may do what those before it may
# Operations without an API key (no role applies).
PUBLIC = "public"

# Operations whose role is their method's: GET reader, POST/PATCH/PUT/DELETE drafter.
BY_METHOD = [
    "GET /analytics",
    "GET /api_keys",
    "GET /approvals",
    "GET /approvals/{id}",
    "GET /billing/subscription",
    "GET /billing/usage",
    "GET /blocklist",
    "POST /blocklist",
    "GET /blocklist.csv",
    "DELETE /blocklist/{id}",
    "GET /campaigns",
    "POST /campaigns",
    "GET /campaigns/{id}",
    "PATCH /campaigns/{id}",
    "DELETE /campaigns/{id}",
    "POST /campaigns/{id}/advance",
    "POST /campaigns/{id}/dispatch",
    "GET /campaigns/{id}/enrollments",
    "POST /campaigns/{id}/enrollments/{enrollment_id}/stop",
    "GET /campaigns/{id}/enrollments/{enrollment_id}/thread",
    "POST /campaigns/{id}/pause",
    "POST /campaigns/{id}/resume",
    "GET /campaigns/{id}/sending_status",
    "GET /campaigns/{id}/stats",
    "GET /contact_imports",
    "POST /contact_imports",
    "GET /contact_imports/{id}",
    "GET /contacts",
    "POST /contacts",
    "GET /contacts/{id}",
    "PATCH /contacts/{id}",
    "DELETE /contacts/{id}",
    "POST /outreaches",
    "GET /replies",
    "GET /replies/{id}",
    "PATCH /replies/{id}",
    "POST /replies/{reply_id}/respond",
    "GET /sending_defaults",
    "PATCH /sending_defaults",
    "GET /signup/verification",
    "POST /signup/verification",
    "GET /smtp_credentials",
    "POST /smtp_credentials",
    "GET /smtp_credentials/{id}",
    "PATCH /smtp_credentials/{id}",
    "DELETE /smtp_credentials/{id}",
    "GET /smtp_credentials/{id}/domain_check",
    "POST /smtp_credentials/{id}/domain_check",
    "POST /smtp_credentials/{id}/inbound",
    "POST /smtp_credentials/{id}/verify",
    "POST /smtp_credentials/oauth",
    "POST /smtp_credentials/simulator",
    "GET /tracking_domain",
    "PUT /tracking_domain",
    "GET /webhook_event_types",
    "GET /webhooks",
    "POST /webhooks",
    "GET /webhooks/{id}",
    "PATCH /webhooks/{id}",
    "DELETE /webhooks/{id}",
    "GET /webhooks/{id}/deliveries",
    "GET /webhooks/{id}/deliveries/{delivery_id}",
    "POST /webhooks/{id}/deliveries/{delivery_id}/redeliver",
    "POST /webhooks/{id}/replay",
    "POST /webhooks/{id}/test",
]

# Operations whose role is not their method's.
EXCEPTIONS = {
    # Keys, secrets, money and the audit trail: admin only.
    "POST /api_keys": ADMIN,
    "DELETE /api_keys/{id}": ADMIN,
    "POST /webhooks/{id}/rotate_secret": ADMIN,
    "POST /billing/checkout": ADMIN,
    "POST /billing/portal": ADMIN,
    "GET /audit_events": ADMIN,
    # Previews that write nothing.
    "POST /campaigns/{id}/steps/preview": READER,
    "POST /campaigns/{id}/dispatch/preview": READER,
    "POST /replies/{reply_id}/respond/preview": READER,
    # Deciding what a drafter asked for: a sender or an admin.
    "POST /approvals/{id}/approve": SENDER,
    "POST /approvals/{id}/reject": SENDER,
}

PUBLIC_OPERATIONS = [
    "GET /health",
    "GET /plans",
    "POST /signup",
    "POST /webhooks/psp",
    "POST /inbound/relay/{credential_id}",
]


def method_role(method: str) -> str:
    return READER if method in SAFE_METHODS else DRAFTER


def _rules() -> dict[str, str]:
    rules = {op: method_role(op.split(" ", 1)[0]) for op in BY_METHOD}
    rules.update(EXCEPTIONS)
    rules.update(dict.fromkeys(PUBLIC_OPERATIONS, PUBLIC))
    return rules


# "METHOD /path/{param}" (the OpenAPI schema's path) -> the least role it needs.
RULES: dict[str, str] = _rules()


def role_allows(role: str, required: str) -> bool:
    if required == PUBLIC:
        return True
    return role in ROLES and ROLES.index(role) >= ROLES.index(required)


@cache
def _templates() -> dict[tuple[str, int], list[tuple[list[str], str]]]:
    """The table's operations by method and number of path segments."""
    index: dict[tuple[str, int], list[tuple[list[str], str]]] = {}
    for operation in RULES:
        method, path = operation.split(" ", 1)
        segments = path.strip("/").split("/")
        index.setdefault((method, len(segments)), []).append((segments, operation))
    return index


def operation_of(method: str, path: str) -> str | None:
    """The table's operation a request is, by its path: the template with the most
    literal segments in common (`/webhooks/psp` before `/webhooks/{id}`), whatever the
    id looks like. None when none matches."""
    method = "GET" if method == "HEAD" else method
    segments = path.strip("/").split("/")
    best, best_score = None, -1
    for template, operation in _templates().get((method, len(segments)), []):
        score = 0
        for expected, actual in zip(template, segments, strict=True):
            if expected.startswith("{"):
                continue
            if expected != actual:
                break
            score += 1
        else:
            if score > best_score:
                best, best_score = operation, score
    return best


def required_role(method: str, path: str) -> str:
    """The least role the request needs: ADMIN for an operation not in the table."""
    operation = operation_of(method, path)
    return RULES[operation] if operation is not None else ADMIN


class KeyRolePermission(BasePermission):
    """403 insufficient_role when the key's role is below the operation's (RULES).
    Runs after authentication and before anything looks at the id or the body."""

    def has_permission(self, request, view) -> bool:
        key = request.auth
        if key is None:  # public views; IsAuthenticated answers the others first
            return True
        role = getattr(key, "role", None) or ""
        required = required_role(request.method, request.path_info)
        if not role_allows(role, required):
            raise InsufficientRole(details={"role": role, "required": required})
        return True


# --- The table in docs/accounts.md ----------------------------------------------------

TABLE_START = "<!-- roles table: generated by `python manage.py roles_table`; do not edit -->"
TABLE_END = "<!-- end of roles table -->"


def _path_then_method(operation: str) -> tuple[str, int]:
    method, path = operation.split(" ", 1)
    return path, ["GET", "POST", "PUT", "PATCH", "DELETE"].index(method)


def roles_table_markdown() -> str:
    """Every API key operation of RULES and the roles that may use it, as Markdown."""
    lines = [
        TABLE_START,
        "",
        "| Operation | Least role | " + " | ".join(ROLES) + " |",
        "|---|---|" + "---|" * len(ROLES),
    ]
    for operation in sorted(RULES, key=_path_then_method):
        required = RULES[operation]
        if required == PUBLIC:
            continue
        marks = " | ".join("yes" if role_allows(role, required) else "no" for role in ROLES)
        lines.append(f"| `{operation}` | {required} | {marks} |")
    lines += ["", TABLE_END]
    return "\n".join(lines)


def roles_table_apply(document: str) -> str:
    """`document` with its roles table replaced by the current one."""
    head, _, rest = document.partition(TABLE_START)
    _, found, tail = rest.partition(TABLE_END)
    if not found:
        raise ValueError("the document has no roles table markers")
    return head + roles_table_markdown() + tail
