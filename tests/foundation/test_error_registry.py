"""The error registry: every code is a class defined in the app that owns it, and
every registered code is documented (its page, the index and the OpenAPI)."""

import html
import importlib

import pytest

from config.api.errors import ERROR_CODES, ServiceError

pytestmark = pytest.mark.django_db

# Where each code's class is defined: each app's errors module, and config's generic codes.
ERRORS_MODULES = [
    "accounts.errors",
    "billing.errors",
    "webhooks.errors",
    "outreach.errors",
    "config.api.errors",
]


def _registered_classes() -> dict[str, type[ServiceError]]:
    found: dict[str, type[ServiceError]] = {}
    pending = list(ServiceError.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if "code" in cls.__dict__ and cls.__module__ in ERRORS_MODULES:
            found[cls.code] = cls
    return found


def test_every_code_has_one_class_importable_from_its_errors_module():
    classes = _registered_classes()
    assert set(classes) == set(ERROR_CODES)
    for code, cls in classes.items():
        module = importlib.import_module(cls.__module__)
        assert getattr(module, cls.__name__) is cls, code
        entry = ERROR_CODES[code]
        assert (cls.status, cls.message, cls.description) == (
            entry.status,
            entry.message,
            entry.description,
        )
        assert cls.status_code == entry.status


@pytest.mark.parametrize(
    ("module", "codes"),
    [
        (
            "accounts.errors",
            {
                "api_key_limit_reached",
                "api_key_not_found",
                "cannot_revoke_last_key",
                "email_unverified",
                "idempotency_conflict",
                "idempotency_in_progress",
                "key_send_limit_reached",
            },
        ),
        (
            "billing.errors",
            {
                "already_subscribed",
                "checkout_in_progress",
                "invalid_signature",
                "no_psp_customer",
                "plan_limit_reached",
                "plan_not_found",
                "plan_not_purchasable",
                "psp_unavailable",
            },
        ),
        (
            "webhooks.errors",
            {
                "webhook_not_found",
                "webhook_delivery_not_found",
                "webhook_disabled",
                "delivery_not_redeliverable",
            },
        ),
    ],
)
def test_each_app_defines_its_own_codes(module, codes):
    defined = {code for code, cls in _registered_classes().items() if cls.__module__ == module}
    assert defined == codes


def test_every_registered_code_is_documented(anon_client):
    index = anon_client.get("/docs/errors").content.decode()
    schema = anon_client.get("/schema", HTTP_ACCEPT="application/vnd.oai.openapi+json").json()
    enum = schema["components"]["schemas"]["Error"]["properties"]["code"]["enum"]
    assert sorted(enum) == sorted(ERROR_CODES)
    for code, entry in ERROR_CODES.items():
        assert entry.message and entry.description, code
        assert code in index
        page = anon_client.get(f"/docs/errors/{code}")
        assert page.status_code == 200, code
        assert html.escape(entry.message.split("`")[0]) in page.content.decode(), code


def test_a_class_naming_its_code_must_document_it():
    with pytest.raises(TypeError, match="description"):
        type(
            "Undocumented", (ServiceError,), {"code": "undocumented", "status": 400, "message": "x"}
        )
    assert "undocumented" not in ERROR_CODES


def test_a_code_cannot_be_registered_twice_differently():
    with pytest.raises(TypeError, match="already registered"):
        type(
            "Twice",
            (ServiceError,),
            {"code": "not_found", "status": 410, "message": "x", "description": "y"},
        )
    assert ERROR_CODES["not_found"].status == 404
