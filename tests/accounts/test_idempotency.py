from datetime import timedelta
from io import StringIO

import pytest
from django.core.management import call_command
from django.test import Client
from django.utils import timezone

from accounts.models import ApiKey, IdempotencyRecord
from accounts.services import api_key_create
from accounts.tasks import idempotency_prune
from tests.accounts.helpers import assert_envelope
from tests.conftest import client_for
from tests.support.stored import stored_value

pytestmark = pytest.mark.django_db


def create_key(client, key=None, body=None, path="/api_keys"):
    extra = {"HTTP_IDEMPOTENCY_KEY": key} if key is not None else {}
    return client.post(path, body if body is not None else {"label": "ci"}, format="json", **extra)


def probe(client, mode, key="k-1", body=None):
    return client.post(
        f"/probe/idempotent/{mode}", body or {"a": 1}, format="json", HTTP_IDEMPOTENCY_KEY=key
    )


def keys_labelled(label):
    return ApiKey.objects.filter(label=label).count()


def test_without_the_header_every_request_acts(api_client):
    assert create_key(api_client).status_code == 201
    assert create_key(api_client).status_code == 201
    assert keys_labelled("ci") == 2
    assert not IdempotencyRecord.objects.exists()


def test_a_replay_returns_the_first_response_verbatim_without_acting_again(api_client):
    first = create_key(api_client, "key-1")
    second = create_key(api_client, "key-1")
    assert first.status_code == second.status_code == 201
    assert second.content == first.content  # Same key id, same plaintext.
    assert second["Content-Type"] == first["Content-Type"]
    assert second["Idempotent-Replay"] == "true"
    assert "Idempotent-Replay" not in first
    assert keys_labelled("ci") == 1


def test_a_replay_works_for_any_key_of_the_account(api_client, account):
    other_key = client_for(api_key_create(account=account, label="second").plaintext)
    first = create_key(api_client, "shared")
    replay = create_key(other_key, "shared")
    assert replay.content == first.content
    assert replay["Idempotent-Replay"] == "true"


def test_keys_are_scoped_to_the_account(api_client, other_client):
    mine = create_key(api_client, "same-key")
    theirs = create_key(other_client, "same-key")
    assert mine.status_code == theirs.status_code == 201
    assert "Idempotent-Replay" not in theirs
    assert mine.json()["id"] != theirs.json()["id"]


def test_json_key_order_and_spacing_do_not_matter(api_client):
    first = api_client.post(
        "/api_keys",
        data='{"label": "ci", "client_kind": "sdk"}',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="order",
    )
    second = api_client.post(
        "/api_keys",
        data='{"client_kind":"sdk","label":"ci"}',
        content_type="application/json",
        HTTP_IDEMPOTENCY_KEY="order",
    )
    assert second["Idempotent-Replay"] == "true"
    assert second.content == first.content


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_multipart_uploads_are_compared_by_fields_and_file_contents(api_client):
    def upload(content: bytes, boundary: str):
        body = (
            (
                f"--{boundary}\r\n"
                'Content-Disposition: form-data; name="note"\r\n\r\nhello\r\n'
                f"--{boundary}\r\n"
                'Content-Disposition: form-data; name="file"; filename="c.csv"\r\n'
                "Content-Type: text/csv\r\n\r\n"
            ).encode()
            + content
            + f"\r\n--{boundary}--\r\n".encode()
        )
        return api_client.post(
            "/probe/upload",
            data=body,
            content_type=f"multipart/form-data; boundary={boundary}",
            HTTP_IDEMPOTENCY_KEY="upload",
        )

    first = upload(b"email\na@example.com\n", "AaB03x")
    assert first.status_code == 200, first.content
    replay = upload(b"email\na@example.com\n", "ZzY98w")  # Another boundary.
    assert replay["Idempotent-Replay"] == "true"
    assert replay.content == first.content
    assert keys_labelled("probe-upload") == 1
    assert_envelope(upload(b"email\nb@example.com\n", "AaB03x"), 409, "idempotency_conflict")


def test_same_key_with_another_body_is_a_conflict(api_client):
    create_key(api_client, "k", {"label": "one"})
    response = create_key(api_client, "k", {"label": "two"})
    assert_envelope(response, 409, "idempotency_conflict")
    assert keys_labelled("two") == 0


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_same_key_on_another_path_is_a_conflict(api_client):
    create_key(api_client, "k", {"a": 1}, path="/probe/idempotent/one")
    response = create_key(api_client, "k", {"a": 1}, path="/probe/idempotent/two")
    assert_envelope(response, 409, "idempotency_conflict")
    assert keys_labelled("probe-two") == 0


@pytest.mark.parametrize("length, status", [(255, 201), (256, 422), (0, 422)])
def test_key_length(api_client, length, status):
    response = create_key(api_client, "k" * length)
    assert response.status_code == status
    if status == 422:
        body = assert_envelope(response, 422, "validation_failed")
        assert "Idempotency-Key" in body["details"]["fields"]
        assert keys_labelled("ci") == 0


def test_4xx_responses_are_stored_and_replayed(api_client):
    first = create_key(api_client, "bad", {"label": ""})
    assert_envelope(first, 422, "validation_failed")
    second = create_key(api_client, "bad", {"label": ""})
    assert second.status_code == 422
    assert second.content == first.content
    assert second["Idempotent-Replay"] == "true"


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_a_raised_service_error_is_rendered_stored_and_rolls_back(api_client):
    first = probe(api_client, "service-error")
    body = assert_envelope(first, 402, "plan_limit_reached")
    assert body["details"] == {"current_period_sends": 100, "monthly_limit": 100}
    assert keys_labelled("probe-service-error") == 0
    second = probe(api_client, "service-error")
    assert second.status_code == 402
    assert second.content == first.content
    assert second["Idempotent-Replay"] == "true"


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_5xx_responses_are_not_stored_and_roll_back(api_client):
    response = probe(api_client, "unavailable")
    assert response.status_code == 503
    assert keys_labelled("probe-unavailable") == 0
    assert not IdempotencyRecord.objects.exists()
    again = probe(api_client, "unavailable")
    assert again.status_code == 503
    assert "Idempotent-Replay" not in again


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_a_crash_releases_the_claim(api_key):
    client = Client(raise_request_exception=False, HTTP_AUTHORIZATION=f"Bearer {api_key.plaintext}")
    response = client.post(
        "/probe/idempotent/crash", {}, content_type="application/json", HTTP_IDEMPOTENCY_KEY="c"
    )
    assert_envelope(response, 500, "internal_error")
    assert keys_labelled("probe-crash") == 0
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_headers_are_replayed(api_client):
    first = probe(api_client, "headers")
    second = probe(api_client, "headers")
    assert second.status_code == 201
    assert second["Location"] == first["Location"] == "/probe/thing"
    assert second["X-Probe"] == "yes"
    assert second.json() == {"mode": "headers", "echo": {"a": 1}}
    assert "RateLimit" in second  # Per delivery, not stored: it changes.
    assert second["RateLimit"] != first["RateLimit"]


@pytest.mark.urls("tests.accounts.idempotency_urls")
def test_an_empty_response_is_replayed_empty(api_client):
    first = probe(api_client, "empty")
    second = probe(api_client, "empty")
    assert first.status_code == second.status_code == 204
    assert second.content == b""
    assert "Content-Type" not in second
    assert second["Idempotent-Replay"] == "true"
    assert keys_labelled("probe-empty") == 1


def _record(account, key, **fields):
    now = timezone.now()
    values = {
        "account": account,
        "key": key,
        "fingerprint": "0" * 64,
        "method": "POST",
        "path": "/api_keys",
        "locked_at": now,
        "created_at": now,
    }
    values.update(fields)
    return IdempotencyRecord.objects.create(**values)


def test_a_request_still_in_progress_is_409(api_client, account):
    create_key(api_client, "busy")
    IdempotencyRecord.objects.filter(key="busy").update(status=IdempotencyRecord.Status.IN_PROGRESS)
    assert_envelope(create_key(api_client, "busy"), 409, "idempotency_in_progress")
    assert keys_labelled("ci") == 1


def test_an_abandoned_claim_is_taken_over_after_the_lease(api_client):
    create_key(api_client, "dead")
    IdempotencyRecord.objects.filter(key="dead").update(
        status=IdempotencyRecord.Status.IN_PROGRESS,
        locked_at=timezone.now() - timedelta(minutes=6),
    )
    response = create_key(api_client, "dead")
    assert response.status_code == 201
    assert "Idempotent-Replay" not in response
    assert IdempotencyRecord.objects.get(key="dead").status == "completed"


def test_after_24_hours_the_key_is_new_again(api_client):
    first = create_key(api_client, "old")
    IdempotencyRecord.objects.filter(key="old").update(
        created_at=timezone.now() - timedelta(hours=24, seconds=1)
    )
    second = create_key(api_client, "old")
    assert second.status_code == 201
    assert "Idempotent-Replay" not in second
    assert second.json()["id"] != first.json()["id"]


def test_the_stored_body_is_encrypted(api_client):
    plaintext = create_key(api_client, "secret").json()["plaintext"]
    record = IdempotencyRecord.objects.get(key="secret")
    assert record.status == "completed" and record.response_status == 201
    assert plaintext not in stored_value(record, "response_body")
    assert record.response_headers == {"Content-Type": "application/json"}


def test_prune_command_and_task_delete_records_older_than_24_hours(account):
    now = timezone.now()
    _record(account, "old-1", created_at=now - timedelta(hours=25))
    _record(account, "old-2", created_at=now - timedelta(hours=24, minutes=1))
    _record(account, "fresh", created_at=now - timedelta(hours=23))
    out = StringIO()
    call_command("idempotency_prune", stdout=out)
    assert "Deleted 2" in out.getvalue()
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]
    _record(account, "old-3", created_at=now - timedelta(days=3))
    assert idempotency_prune.delay().get() == 1
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]


def test_prune_runs_on_beat(settings):
    schedule = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert "accounts.tasks.idempotency_prune" in schedule
