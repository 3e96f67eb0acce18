"""/contact_imports: CSV or JSON, processed by the worker task in batches."""

import io
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from django.utils import timezone

from outreach.contacts import import_queue
from outreach.contacts import imports as contacts_imports
from outreach.models.contacts import Contact, ContactImport
from outreach.models.sending import Enrollment
from tests.outreach.factories import CampaignFactory, ContactFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


def upload(client, content: bytes | str, *, name="contacts.csv", **extra):
    if isinstance(content, str):
        content = content.encode()
    data = {"file": io.BytesIO(content), **extra}
    data["file"].name = name
    return client.post("/contact_imports", data, format="multipart")


def run(capture, client, content, **extra):
    """Upload and let the (eager) worker task run on commit; return the import as GET shows it."""
    with capture(execute=True):
        response = upload(client, content, **extra)
    assert response.status_code == 201, response.content
    assert response.json()["status"] == "pending"
    return client.get(f"/contact_imports/{response.json()['id']}").json()


def run_json(capture, client, body):
    with capture(execute=True):
        response = client.post("/contact_imports", body, format="json")
    assert response.status_code == 201, response.content
    return client.get(f"/contact_imports/{response.json()['id']}").json()


def test_201_at_once_with_pending_and_no_work_done(api_client):
    response = upload(api_client, "email\na@example.org\n")
    assert response.status_code == 201
    body = response.json()
    assert body["status"] == "pending"
    assert body["processed_rows"] == 0 and body["total_rows"] is None
    assert body["completed_at"] is None
    assert not Contact.objects.exists()
    assert api_client.get(f"/contact_imports/{body['id']}").json()["status"] == "pending"


def test_csv_header_mapping(api_client, account, django_capture_on_commit_callbacks):
    csv = (
        "E-mail Address,First Name,Surname,Organisation,Job Title,fields.city,\n"
        "ada@example.org,Ada,Lovelace,Engines,Countess,London,ignored\n"
    )
    result = run(django_capture_on_commit_callbacks, api_client, csv)
    assert result["status"] == "completed", result
    contact = Contact.objects.get(account=account)
    assert (contact.email, contact.first_name, contact.last_name, contact.company) == (
        "ada@example.org",
        "Ada",
        "Lovelace",
        "Engines",
    )
    assert contact.fields == {"job_title": "Countess", "city": "London"}


@pytest.mark.parametrize("delimiter", [",", ";", "\t"])
def test_delimiters_and_bom(api_client, django_capture_on_commit_callbacks, delimiter):
    csv = "\ufeff" + delimiter.join(["email", "first_name"]) + "\n"
    csv += delimiter.join(["a@example.org", "A"]) + "\n"
    result = run(django_capture_on_commit_callbacks, api_client, csv)
    assert result["created_count"] == 1, result
    assert Contact.objects.get().first_name == "A"


def test_invalid_rows_are_skipped_with_row_and_reason(
    api_client, django_capture_on_commit_callbacks
):
    csv = "email,first_name\nok@example.org,Ok\nnot-an-email,Bad\n\n,Empty\nok2@example.org,Ok2\n"
    result = run(django_capture_on_commit_callbacks, api_client, csv)
    assert result["status"] == "completed"
    assert result["total_rows"] == 4  # the blank line is not a row
    assert (result["created_count"], result["updated_count"], result["skipped_count"]) == (2, 0, 2)
    assert [(e["row"], e["email"]) for e in result["errors"]] == [
        (3, "not-an-email"),
        (5, ""),
    ]
    assert all(e["message"].startswith("email: ") for e in result["errors"])


def test_duplicates_merge_within_file_and_with_existing(
    api_client, account, django_capture_on_commit_callbacks
):
    ContactFactory(account=account, email="old@example.org", first_name="Old", fields={"a": "1"})
    csv = (
        "email,first_name,company,team\n"
        "OLD@example.org,,NewCo,x\n"
        "new@example.org,New,,\n"
        "NEW@example.org,,Later Inc,y\n"
    )
    result = run(django_capture_on_commit_callbacks, api_client, csv)
    assert (result["created_count"], result["updated_count"], result["skipped_count"]) == (1, 2, 0)
    assert Contact.objects.filter(account=account).count() == 2
    old = Contact.objects.get(email_lower="old@example.org")
    assert (old.email, old.first_name, old.company) == ("old@example.org", "Old", "NewCo")
    assert old.fields == {"a": "1", "team": "x"}
    new = Contact.objects.get(email_lower="new@example.org")
    assert (new.email, new.first_name, new.company, new.fields) == (
        "new@example.org",
        "New",
        "Later Inc",
        {"team": "y"},
    )


def test_json_contacts(api_client, account, django_capture_on_commit_callbacks):
    result = run_json(
        django_capture_on_commit_callbacks,
        api_client,
        {
            "contacts": [
                {"email": "a@example.org", "first_name": "A", "fields": {"x": "1"}, "role": "cto"},
                {"email": "bad"},
                "not an object",
                {"email": "b@example.org", "fields": {"n": 5}},
            ]
        },
    )
    assert result["status"] == "completed"
    assert result["source_format"] == "json"
    assert (result["created_count"], result["skipped_count"]) == (1, 3)
    assert [e["row"] for e in result["errors"]] == [1, 2, 3]
    assert Contact.objects.get(account=account).fields == {"x": "1", "role": "cto"}


def test_campaign_id_enrolls_non_suppressed_as_pending_once(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    ContactFactory(account=account, email="gone@example.org", unsubscribed_at=timezone.now())
    ContactFactory(account=account, email="bounced@example.org", bounced_at=timezone.now())
    csv = "email\na@example.org\nb@example.org\ngone@example.org\nbounced@example.org\n"
    for _ in range(2):
        result = run(
            django_capture_on_commit_callbacks, api_client, csv, campaign_id=str(campaign.pk)
        )
        assert result["campaign_id"] == str(campaign.pk)
    enrolled = Enrollment.objects.filter(campaign=campaign)
    assert sorted(enrolled.values_list("contact__email", flat=True)) == [
        "a@example.org",
        "b@example.org",
    ]
    assert set(enrolled.values_list("status", flat=True)) == {"pending"}


def test_enrolling_keeps_an_existing_enrollment_state(
    api_client, account, django_capture_on_commit_callbacks
):
    campaign = CampaignFactory(account=account)
    contact = ContactFactory(account=account, email="a@example.org")
    Enrollment.objects.create(campaign=campaign, contact=contact, status="sent", current_step=1)
    run(
        django_capture_on_commit_callbacks,
        api_client,
        "email\na@example.org\n",
        campaign_id=str(campaign.pk),
    )
    assert Enrollment.objects.get(campaign=campaign).status == "sent"


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"", "empty"),
        (b"   \n\n", "empty"),
        (b"name,company\nAda,Engines\n", "No email column"),
        (b'{"contacts": []}', "No email column"),
        (b'email,notes\na@example.org,"' + b"x" * 200_000 + b'"\n', "Malformed CSV"),
        (b'email,notes\na@example.org,"open quote\nb@example.org,x\n', "Malformed CSV"),
    ],
)
def test_malformed_files_end_failed_with_a_reason(
    api_client, django_capture_on_commit_callbacks, content, reason
):
    result = run(django_capture_on_commit_callbacks, api_client, content)
    assert result["status"] == "failed"
    assert reason in result["failure_reason"]
    assert result["completed_at"] is not None
    assert not Contact.objects.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (
            b"email,name\n" + "é".encode("latin-1") + b"@x.org,\xe9\n",
            "Must be a CSV file in UTF-8 (invalid byte at offset 11). Save it as CSV UTF-8.",
        ),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "Must be a CSV file: this one holds NUL bytes."),
    ],
)
def test_a_file_that_is_not_text_is_refused_at_upload(api_client, content, message):
    response = upload(api_client, content)
    assert response.status_code == 422
    assert response.json()["details"]["fields"] == {"file": [message]}
    assert not ContactImport.objects.exists()


def test_an_empty_campaign_id_in_a_form_is_refused(api_client):
    response = upload(api_client, "email\na@example.org\n", campaign_id="")
    assert response.status_code == 422
    assert response.json()["details"]["fields"] == {"campaign_id": ["Must be a valid UUID."]}
    assert not ContactImport.objects.exists()


def test_header_only_completes_with_zero_rows(api_client, django_capture_on_commit_callbacks):
    result = run(django_capture_on_commit_callbacks, api_client, "email,first_name\n")
    assert result["status"] == "completed"
    assert result["total_rows"] == 0 and result["processed_rows"] == 0


@pytest.mark.parametrize(
    ("body", "fields"),
    [
        ({}, {"contacts"}),
        ({"contacts": []}, {"contacts"}),
        ({"contacts": "a@example.org"}, {"contacts"}),
        ({"contacts": [{"email": "a@example.org"}], "campaign_id": "nope"}, {"campaign_id"}),
    ],
)
def test_invalid_requests(api_client, body, fields):
    assert_fields(api_client.post("/contact_imports", body, format="json"), *fields)


def test_multipart_without_file(api_client):
    assert_fields(
        api_client.post("/contact_imports", {"campaign_id": ""}, format="multipart"),
        "file",
        "campaign_id",  # an empty form value is not "no campaign"
    )


def test_foreign_campaign_id_is_validation_failed(api_client, other_account):
    foreign = CampaignFactory(account=other_account)
    response = upload(api_client, "email\na@example.org\n", campaign_id=str(foreign.pk))
    assert assert_fields(response, "campaign_id")["campaign_id"] == ["No such campaign."]
    assert not ContactImport.objects.exists()


@override_settings(MAX_UPLOAD_BODY_BYTES=1000)
def test_upload_over_the_limit_is_413(api_client):
    response = upload(api_client, "email\n" + "a@example.org\n" * 200)
    assert_error(response, 413, "payload_too_large")


def test_wrong_content_type_is_415(api_client):
    response = api_client.post("/contact_imports", "email\n", content_type="text/csv")
    body = assert_error(response, 415, "unsupported_media_type")
    assert body["message"] == (
        "Unsupported Content-Type text/csv: send the header "
        "Content-Type: application/json or multipart/form-data."
    )


@override_settings(CONTACT_IMPORT_BATCH_SIZE=2)
def test_progress_is_visible_while_processing(api_client, account):
    contact_import = ContactImport.objects.create(
        account=account,
        source_format="csv",
        source_data=b"email\n" + b"".join(f"u{i}@example.org\n".encode() for i in range(5)),
    )
    seen = []

    def progress(done, total):
        body = api_client.get(f"/contact_imports/{contact_import.pk}").json()
        seen.append((body["status"], body["processed_rows"], body["total_rows"]))

    contacts_imports.contact_import_run(import_id=contact_import.pk, progress=progress)
    assert seen == [("processing", 2, 5), ("processing", 4, 5), ("processing", 5, 5)]
    final = api_client.get(f"/contact_imports/{contact_import.pk}").json()
    assert final["status"] == "completed" and final["created_count"] == 5
    contact_import.refresh_from_db()
    assert bytes(contact_import.source_data) == b""  # the upload is not kept


class WorkerDied(BaseException):
    pass


def run_dying_after_first_batch(contact_import: ContactImport) -> None:
    """Run the import until its first batch has committed, then die as a worker does."""

    def die(done, total):
        raise WorkerDied()

    with pytest.raises(WorkerDied):
        contacts_imports.contact_import_run(import_id=contact_import.pk, progress=die)


@override_settings(CONTACT_IMPORT_BATCH_SIZE=3, CONTACT_IMPORT_STALE_SECONDS=60)
def test_a_dead_run_is_redriven_and_resumes_after_its_last_batch(account):
    campaign = CampaignFactory(account=account)
    csv = b"email\n" + b"".join(f"u{i}@example.org\n".encode() for i in range(7)) + b"bad\n"
    contact_import = ContactImport.objects.create(
        account=account, campaign=campaign, source_format="csv", source_data=csv
    )

    run_dying_after_first_batch(contact_import)
    contact_import.refresh_from_db()
    assert (contact_import.status, contact_import.processed_rows) == ("processing", 3)

    # Not stale yet: the redrive leaves it alone, and a duplicate task cannot claim it.
    assert import_queue.contact_imports_redrive() == []
    assert contacts_imports.contact_import_run(import_id=contact_import.pk) is None

    ContactImport.objects.filter(pk=contact_import.pk).update(
        heartbeat_at=timezone.now() - timedelta(seconds=61)
    )
    assert import_queue.contact_imports_redrive() == [contact_import.pk]  # eager task ran
    contact_import.refresh_from_db()
    assert contact_import.status == "completed"
    assert contact_import.attempts == 2
    assert (
        contact_import.processed_rows,
        contact_import.created_count,
        contact_import.updated_count,
        contact_import.skipped_count,
    ) == (8, 7, 0, 1)
    assert Contact.objects.filter(account=account).count() == 7
    assert Enrollment.objects.filter(campaign=campaign).count() == 7


@override_settings(CONTACT_IMPORT_STALE_SECONDS=60)
def test_a_pending_import_whose_task_was_lost_is_redriven(account):
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=b"email\na@example.org\n"
    )
    ContactImport.objects.filter(pk=contact_import.pk).update(
        created_at=timezone.now() - timedelta(seconds=120)
    )
    assert import_queue.contact_imports_redrive() == [contact_import.pk]
    contact_import.refresh_from_db()
    assert contact_import.status == "completed"


@override_settings(CONTACT_IMPORT_BATCH_SIZE=2, CONTACT_IMPORT_STALE_SECONDS=60)
def test_a_superseded_run_writes_nothing_more(account):
    csv = b"email\n" + b"".join(f"u{i}@example.org\n".encode() for i in range(6))
    contact_import = ContactImport.objects.create(
        account=account, source_format="csv", source_data=csv
    )

    def another_run_takes_over(done, total):
        ContactImport.objects.filter(pk=contact_import.pk).update(
            heartbeat_at=timezone.now() - timedelta(seconds=61)
        )
        assert contacts_imports.contact_import_claim(import_id=contact_import.pk) is not None

    assert (
        contacts_imports.contact_import_run(
            import_id=contact_import.pk, progress=another_run_takes_over
        )
        is None
    )
    contact_import.refresh_from_db()
    assert contact_import.processed_rows == 2  # only the first run's first batch
    assert Contact.objects.count() == 2
    assert contact_import.attempts == 2 and contact_import.status == "processing"


@override_settings(CONTACT_IMPORT_MAX_ATTEMPTS=2, CONTACT_IMPORT_STALE_SECONDS=60)
def test_an_import_that_keeps_dying_ends_failed(account):
    contact_import = ContactImport.objects.create(
        account=account,
        source_format="csv",
        source_data=b"email\na@example.org\n",
        status="processing",
        attempts=2,
        heartbeat_at=timezone.now() - timedelta(seconds=61),
    )
    result = contacts_imports.contact_import_run(import_id=contact_import.pk)
    assert result.status == "failed"
    assert "Gave up after 2 interrupted attempts" in result.failure_reason


def test_ten_thousand_rows_with_valid_invalid_and_duplicates(
    api_client, account, django_capture_on_commit_callbacks
):
    """8,000 distinct addresses (500 already stored, 100 of those unsubscribed), 1,000
    invalid rows, 1,000 repeats of earlier rows in other casing: exact counts."""
    campaign = CampaignFactory(account=account)
    Contact.objects.bulk_create(
        [
            Contact(
                account=account,
                email=f"person{i}@example.org",
                email_lower=f"person{i}@example.org",
                unsubscribed_at=timezone.now() if i < 100 else None,
            )
            for i in range(500)
        ]
    )
    lines = ["email,first_name,company,plan"]
    for i in range(10_000):
        if i % 10 == 9:
            lines.append(f"invalid-{i},Bad,,")  # 1,000 invalid
        elif i % 10 == 8:
            lines.append(f"PERSON{i - 8}@EXAMPLE.ORG,Dup,DupCo,gold")  # 1,000 duplicates
        else:
            lines.append(f"person{i}@example.org,P{i},Co{i},")
    # Valid distinct rows: i % 10 in 0..7 -> 8,000 addresses person{i}; the first 500 of
    # those with i < 500 ... map the pre-stored range explicitly:
    distinct = {i for i in range(10_000) if i % 10 < 8}
    stored_hit = len([i for i in range(500) if i in distinct])
    unsub_hit = len([i for i in range(100) if i in distinct])
    result = run(
        django_capture_on_commit_callbacks,
        api_client,
        "\n".join(lines) + "\n",
        campaign_id=str(campaign.pk),
    )
    assert result["status"] == "completed", result
    assert result["total_rows"] == 10_000
    assert result["processed_rows"] == 10_000
    assert result["skipped_count"] == 1_000
    assert result["created_count"] == 8_000 - stored_hit
    assert result["updated_count"] == stored_hit + 1_000
    assert len(result["errors"]) == 100
    assert result["errors"][0] == {
        "row": 11,
        "email": "invalid-9",
        "message": result["errors"][0]["message"],
    }
    # The 500 pre-stored contacts that are not in the file stay too.
    assert Contact.objects.filter(account=account).count() == 8_000 + (500 - stored_hit)
    dup = Contact.objects.get(account=account, email_lower="person0@example.org")
    assert (dup.first_name, dup.company, dup.fields) == ("Dup", "DupCo", {"plan": "gold"})
    assert Enrollment.objects.filter(campaign=campaign, status="pending").count() == (
        8_000 - unsub_hit
    )


# --- manage.py contacts_import ---------------------------------------------------------


def test_command_imports_with_progress(account, tmp_path):
    campaign = CampaignFactory(account=account)
    path = tmp_path / "people.csv"
    path.write_text("email,first_name\na@example.org,A\nbad,B\nb@example.org,B\n")
    out = io.StringIO()
    call_command(
        "contacts_import", account.email.upper(), str(path), campaign=str(campaign.pk), stdout=out
    )
    text = out.getvalue()
    assert "[########################################] 3/3 rows (100%)" in text
    assert "3 rows, 2 created, 0 updated, 1 skipped" in text
    assert "row 3 (bad)" in text
    assert Enrollment.objects.filter(campaign=campaign).count() == 2
    assert ContactImport.objects.get().status == "completed"


def test_command_by_account_id_and_errors(account, other_account, tmp_path):
    path = tmp_path / "people.csv"
    path.write_text("email\na@example.org\n")
    call_command("contacts_import", str(account.pk), str(path), stdout=io.StringIO())
    assert Contact.objects.filter(account=account).count() == 1
    with pytest.raises(CommandError, match="No single account"):
        call_command("contacts_import", "nobody@example.org", str(path), stdout=io.StringIO())
    with pytest.raises(CommandError, match="No such file"):
        call_command("contacts_import", str(account.pk), str(tmp_path / "x.csv"))
    foreign = CampaignFactory(account=other_account)
    with pytest.raises(CommandError, match="No campaign"):
        call_command("contacts_import", str(account.pk), str(path), campaign=str(foreign.pk))
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"name\nx\n")
    with pytest.raises(CommandError, match="No email column"):
        call_command("contacts_import", str(account.pk), str(bad), stdout=io.StringIO())


@pytest.mark.parametrize("count", [3, 30])
def test_list_is_paginated_with_bounded_queries(
    api_client, account, count, django_assert_max_num_queries, auth_queries
):
    imports = [
        ContactImport.objects.create(account=account, source_format="csv", source_data=b"x" * 1000)
        for _ in range(count)
    ]
    with django_assert_max_num_queries(auth_queries + 1):
        response = api_client.get("/contact_imports?limit=1000")
    assert [i["id"] for i in response.json()] == [str(i.pk) for i in reversed(imports)]
    page = api_client.get("/contact_imports?limit=2")
    assert len(page.json()) == 2 and 'rel="next"' in page["Link"]


def _csv_import(account, campaign, *, rows: int) -> ContactImport:
    """A pending CSV import of `rows` new addresses into `campaign`."""
    csv = b"email\n" + b"".join(f"u{i}@example.org\n".encode() for i in range(rows))
    return ContactImport.objects.create(
        account=account, campaign=campaign, source_format="csv", source_data=csv
    )


@pytest.mark.django_db(transaction=True)  # each batch commits, as in production
@override_settings(CONTACT_IMPORT_BATCH_SIZE=3)
def test_a_campaign_deleted_during_the_import_stops_enrolling_not_importing(account):
    campaign = CampaignFactory(account=account)
    contact_import = _csv_import(account, campaign, rows=7)
    enrolled_before_delete = []

    def delete_after_first_batch(done, total):
        if done == 3:
            enrolled_before_delete.append(Enrollment.objects.filter(campaign=campaign).count())
            campaign.delete()

    contacts_imports.contact_import_run(
        import_id=contact_import.pk, progress=delete_after_first_batch
    )
    contact_import.refresh_from_db()
    assert enrolled_before_delete == [3]
    assert contact_import.status == "completed"
    assert (contact_import.processed_rows, contact_import.created_count) == (7, 7)
    assert contact_import.campaign_id is None
    assert Contact.objects.filter(account=account).count() == 7
    assert not Enrollment.objects.exists()


@override_settings(CONTACT_IMPORT_BATCH_SIZE=10_000)
def test_the_largest_batch_fits_postgresqls_parameter_limit(account):
    # 6,000 new contacts in one batch, parameters bound server-side: each statement of
    # the batch must stay under PostgreSQL's 65,535 parameters (the lookup binds one per
    # address; the upsert, at 13 columns a row, must not bind one per value).
    campaign = CampaignFactory(account=account)
    contact_import = _csv_import(account, campaign, rows=6000)
    contacts_imports.contact_import_run(import_id=contact_import.pk)
    contact_import.refresh_from_db()
    assert (contact_import.status, contact_import.created_count) == ("completed", 6000)
    assert Enrollment.objects.filter(campaign=campaign).count() == 6000
