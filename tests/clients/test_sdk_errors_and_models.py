"""The SDK's pieces that need no server: the error classes against the API's registry,
typed results against fields added later, and verify() against the service's signer."""

import json
import time

import outreach_sdk
import pytest
from outreach_sdk import errors, models, webhooks

from config.api.errors import ERROR_CODES
from webhooks.secrets import secret_generate, signature_header


def test_it_has_an_exception_class_for_every_code_the_api_returns():
    for code, entry in ERROR_CODES.items():
        cls = errors.error_class(code, entry.status)
        assert cls.code == code, code
        family = errors.STATUS_FAMILIES.get(entry.status, errors.ServerError)
        assert issubclass(cls, family), code
        assert getattr(outreach_sdk, cls.__name__) is cls


def test_an_exception_carries_code_message_details_and_status():
    cls = errors.error_class("plan_limit_reached", 402)
    error = cls(
        "The plan's send limit for this period is reached.",
        code="plan_limit_reached",
        status=402,
        details={"current_period_sends": 100, "monthly_limit": 100},
    )
    assert isinstance(error, errors.PaymentRequiredError)
    assert (error.code, error.status) == ("plan_limit_reached", 402)
    assert error.details == {"current_period_sends": 100, "monthly_limit": 100}
    assert str(error) == "402 plan_limit_reached: The plan's send limit for this period is reached."


def test_a_code_unknown_to_the_sdk_raises_its_status_family():
    assert errors.error_class("brand_new_conflict", 409) is errors.ConflictError
    assert errors.error_class("brand_new_outage", 503) is errors.ServerError
    assert errors.error_class("brand_new_teapot", 418) is errors.OutreachError


def test_typed_results_ignore_fields_added_later_and_parse_timestamps():
    campaign = models.Campaign.from_api(
        {
            "id": "c1",
            "name": "Q4",
            "created_at": "2026-11-24T06:00:00Z",
            "status": "draft",
            "a_field_from_next_year": {"x": 1},
        }
    )
    assert campaign.name == "Q4"
    assert campaign.created_at.isoformat() == "2026-11-24T06:00:00+00:00"
    assert campaign.raw["a_field_from_next_year"] == {"x": 1}
    assert not hasattr(campaign, "a_field_from_next_year")


def test_an_enrollment_shows_what_its_bounce_meant():
    enrollment = models.Enrollment.from_api(
        {
            "id": "e1",
            "status": "bounced",
            "bounce_reason": "552 5.2.2 mailbox full",
            "bounce_type": "soft",
            "bounce_category": "mailbox_full",
        }
    )
    assert (enrollment.bounce_type, enrollment.bounce_category) == ("soft", "mailbox_full")
    assert models.Enrollment.from_api({"id": "e2", "status": "sent"}).bounce_type is None


def _signed(body: bytes, secret: str, at: int | None = None) -> str:
    return signature_header(secret=secret, body=body, timestamp=at or int(time.time()))


def test_verify_accepts_the_services_signature_and_returns_the_event():
    secret = secret_generate()
    body = json.dumps({"id": "e1", "type": "campaign.paused", "data": {}}).encode()
    assert webhooks.verify(body, _signed(body, secret), secret)["id"] == "e1"
    assert webhooks.verify(body.decode(), _signed(body, secret), secret)["id"] == "e1"


@pytest.mark.parametrize(
    "header",
    [None, "", "t=abc,v1=00", "v1=00", "t=123", "nonsense"],
)
def test_verify_refuses_a_missing_or_malformed_header(header):
    with pytest.raises(webhooks.SignatureVerificationError, match="missing or malformed"):
        webhooks.verify(b"{}", header, "whsec_x")


def test_verify_refuses_a_stale_or_future_timestamp():
    secret = secret_generate()
    body = b'{"id": "e1"}'
    for offset in (-301, 301):
        with pytest.raises(webhooks.SignatureVerificationError, match="300 seconds"):
            webhooks.verify(body, _signed(body, secret, int(time.time()) + offset), secret)
    old = _signed(body, secret, int(time.time()) - 1000)
    assert webhooks.verify(body, old, secret, tolerance=2000)["id"] == "e1"
