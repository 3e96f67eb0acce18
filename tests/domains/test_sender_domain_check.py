"""GET/POST /smtp_credentials/:id/domain_check against a real DNS server; beat's refresh;
require_authenticated_domain in the scheduler and in sending_status."""

from datetime import timedelta

import pytest
from django.utils import timezone

from outreach.domains.beat import sender_domains_check
from outreach.models.domains import SenderDomainCheck
from outreach.models.sending import Enrollment, SendClaim
from outreach.sending.scheduler import schedule_due
from tests.domains.conftest import authenticated_zone
from tests.outreach.factories import CampaignFactory, CredentialFactory, EnrollmentFactory
from tests.outreach.helpers import assert_error, assert_fields

pytestmark = pytest.mark.django_db


def codes(body) -> dict[str, str]:
    return {f["code"]: f["level"] for f in body["findings"]}


def check(client, credential, **body):
    response = client.post(f"/smtp_credentials/{credential.pk}/domain_check", body, format="json")
    assert response.status_code == 200, response.content
    return response.json()


def test_pending_before_the_first_check(api_client, account):
    credential = CredentialFactory(account=account, from_email="ada@fresh.test")
    response = api_client.get(f"/smtp_credentials/{credential.pk}/domain_check")
    assert response.status_code == 200
    assert response.json() == {
        "credential_id": str(credential.pk),
        "domain": "fresh.test",
        "status": "pending",
        "checked_at": None,
        "findings": [],
        "records": {},
        "dkim_selectors": [],
    }


def test_an_authenticated_domain_passes_and_is_stored(api_client, account, zone):
    authenticated_zone(zone, "good.test")
    credential = CredentialFactory(account=account, from_email="ada@good.test")
    body = check(api_client, credential)
    assert body["status"] == "pass", body["findings"]
    assert body["findings"] == []
    assert body["records"] == {
        "spf": "v=spf1 include:_spf.provider.test -all",
        "dkim_selectors": ["google"],
        "dmarc": "v=DMARC1; p=quarantine; rua=mailto:d@good.test",
        "mx": ["10 mx.good.test."],
    }
    assert body["checked_at"] is not None
    shown = api_client.get(f"/smtp_credentials/{credential.pk}/domain_check").json()
    assert shown == body


def test_a_bare_domain_has_every_error(api_client, account, zone):
    zone.add("bare.test", "A", "192.0.2.10")
    credential = CredentialFactory(account=account, from_email="ada@bare.test")
    body = check(api_client, credential)
    assert body["status"] == "error"
    assert codes(body) == {
        "spf_missing": "error",
        "dkim_not_found": "error",
        "dmarc_missing": "error",
        "mx_missing": "warning",
    }
    assert all(f["message"] for f in body["findings"])


def test_spf_problems(api_client, account, zone):
    # Eleven includes, each one lookup: past the limit of ten.
    includes = " ".join(f"include:_s{i}.many.test" for i in range(11))
    zone.add("many.test", "TXT", f"v=spf1 {includes} bogus:term +all")
    for i in range(11):
        zone.add(f"_s{i}.many.test", "TXT", "v=spf1 ip4:192.0.2.1 -all")
    zone.add("two.test", "TXT", "v=spf1 -all")
    zone.add("two.test", "TXT", "v=spf1 mx -all")
    many = check(api_client, CredentialFactory(account=account, from_email="a@many.test"))
    assert codes(many)["spf_too_many_lookups"] == "error"
    assert codes(many)["spf_syntax"] == "error"
    assert codes(many)["spf_allows_all"] == "warning"
    assert "needs 11 DNS lookups" in next(
        f["message"] for f in many["findings"] if f["code"] == "spf_too_many_lookups"
    )
    two = check(api_client, CredentialFactory(account=account, from_email="a@two.test"))
    assert codes(two)["spf_multiple"] == "error"


def test_dmarc_and_mx_findings(api_client, account, zone):
    authenticated_zone(zone, "org.test")
    # A subdomain without its own DMARC record falls under the organizational domain's.
    zone.add("mail.org.test", "TXT", "v=spf1 -all")
    zone.add("selector9._domainkey.mail.org.test", "TXT", "v=DKIM1; p=MIIB")
    zone.add("mail.org.test", "MX", "0 .")
    zone.add("lax.test", "TXT", "v=spf1 -all")
    zone.add("google._domainkey.lax.test", "TXT", "v=DKIM1; p=")
    zone.add("selector1._domainkey.lax.test", "TXT", "v=DKIM1; p=MIIB")
    zone.add("_dmarc.lax.test", "TXT", "v=DMARC1; p=none; adkim=s")
    zone.add("lax.test", "MX", "10 mx.lax.test.")
    sub = check(
        api_client,
        CredentialFactory(account=account, from_email="a@mail.org.test"),
        dkim_selectors=["Selector9"],
    )
    assert codes(sub) == {"mx_null": "error"}
    assert sub["records"]["dkim_selectors"] == ["selector9"]
    assert sub["dkim_selectors"] == ["selector9"]
    lax = check(api_client, CredentialFactory(account=account, from_email="a@lax.test"))
    assert lax["status"] == "warning"
    assert codes(lax) == {
        "dkim_revoked": "warning",
        "dmarc_policy_none": "warning",
        "dmarc_strict_alignment": "warning",
    }


def test_a_lookup_that_times_out_is_a_warning_not_an_error(api_client, account, zone):
    zone.drop("slow.test")
    zone.drop("_dmarc.slow.test")
    zone.drop("google._domainkey.slow.test")
    zone.add("selector1._domainkey.slow.test", "TXT", "v=DKIM1; p=MIIB")
    body = check(api_client, CredentialFactory(account=account, from_email="a@slow.test"))
    assert set(codes(body).values()) == {"warning"}
    assert codes(body) == {"dns_lookup_failed": "warning"}
    assert body["status"] == "warning"


def test_named_selectors_are_kept_for_later_checks(api_client, account, zone):
    authenticated_zone(zone, "kept.test")
    credential = CredentialFactory(account=account, from_email="a@kept.test")
    check(api_client, credential, dkim_selectors=["s1", "s1", "k2"])
    again = check(api_client, credential)
    assert again["dkim_selectors"] == ["s1", "k2"]
    assert ("s1._domainkey.kept.test", "TXT") in zone.queries


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"dkim_selectors": ["bad selector"]}, "dkim_selectors"),
        ({"dkim_selectors": "s1"}, "dkim_selectors"),
        ({"dkim_selectors": [f"s{i}" for i in range(11)]}, "dkim_selectors"),
    ],
)
def test_bad_selectors_are_refused(api_client, account, body, field):
    credential = CredentialFactory(account=account)
    response = api_client.post(
        f"/smtp_credentials/{credential.pk}/domain_check", body, format="json"
    )
    assert_fields(response, field)
    assert not SenderDomainCheck.objects.exists()


def test_another_accounts_mailbox_is_a_404(api_client, other_account, anon_client):
    credential = CredentialFactory(account=other_account)
    for method in ("get", "post"):
        response = getattr(api_client, method)(f"/smtp_credentials/{credential.pk}/domain_check")
        assert_error(response, 404, "credential_not_found")
    assert_error(
        api_client.get("/smtp_credentials/not-a-uuid/domain_check"), 404, "credential_not_found"
    )
    assert anon_client.get(f"/smtp_credentials/{credential.pk}/domain_check").status_code == 401


def test_beat_checks_new_stale_and_changed_mailboxes_only(account, zone):
    authenticated_zone(zone, "beat.test")
    fresh = CredentialFactory(account=account, from_email="a@beat.test")
    stale = CredentialFactory(account=account, from_email="b@beat.test")
    moved = CredentialFactory(account=account, from_email="c@beat.test")
    disabled = CredentialFactory(
        account=account, from_email="d@beat.test", disabled_at=timezone.now()
    )
    now = timezone.now()
    for credential, age, domain in (
        (fresh, 1, "beat.test"),
        (stale, 25, "beat.test"),
        (moved, 1, "old.test"),
    ):
        SenderDomainCheck.objects.create(
            credential=credential,
            domain=domain,
            status="error",
            checked_at=now - timedelta(hours=age),
        )
    never = CredentialFactory(account=account, from_email="e@beat.test")

    assert sender_domains_check() == 3
    statuses = dict(SenderDomainCheck.objects.values_list("credential_id", "status"))
    assert statuses[fresh.pk] == "error"  # checked an hour ago: left
    assert statuses[stale.pk] == statuses[moved.pk] == statuses[never.pk] == "pass"
    assert disabled.pk not in statuses
    assert sender_domains_check() == 0


def _unauthenticated(credential):
    SenderDomainCheck.objects.create(
        credential=credential,
        domain="bare.test",
        status="error",
        findings=[{"code": "dmarc_missing", "level": "error", "message": "No DMARC."}],
        checked_at=timezone.now(),
    )


def test_require_authenticated_domain_holds_sends_and_says_why(api_client, account):
    campaign = CampaignFactory(account=account, status="active", require_authenticated_domain=True)
    credential = campaign.credentials.get()
    _unauthenticated(credential)
    enrollment = EnrollmentFactory(
        campaign=campaign, status="scheduled", next_send_at=timezone.now() - timedelta(minutes=1)
    )
    now = timezone.now()
    assert schedule_due(now=now) == []
    enrollment.refresh_from_db()
    assert enrollment.next_send_at > now + timedelta(minutes=10)
    assert not SendClaim.objects.exists()

    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    (mailbox,) = body["mailboxes"]
    assert mailbox["can_send_now"] is False
    reason = next(r for r in mailbox["reasons"] if r["code"] == "domain_unauthenticated")
    assert "dmarc_missing" in reason["detail"]
    assert mailbox["domain_check"]["status"] == "error"
    assert body["upcoming"] == []


def test_without_the_setting_findings_show_but_do_not_hold(api_client, account):
    campaign = CampaignFactory(account=account, status="active")
    credential = campaign.credentials.get()
    _unauthenticated(credential)
    EnrollmentFactory(
        campaign=campaign, status="scheduled", next_send_at=timezone.now() - timedelta(minutes=1)
    )
    assert len(schedule_due(now=timezone.now())) == 1
    body = api_client.get(f"/campaigns/{campaign.pk}/sending_status").json()
    (mailbox,) = body["mailboxes"]
    assert "domain_unauthenticated" not in [r["code"] for r in mailbox["reasons"]]
    assert mailbox["domain_check"]["findings"][0]["code"] == "dmarc_missing"


def test_another_mailbox_of_the_campaign_takes_the_send(account):
    campaign = CampaignFactory(account=account, status="active", require_authenticated_domain=True)
    held = campaign.credentials.get()
    _unauthenticated(held)
    good = CredentialFactory(account=account)
    campaign.credentials.add(good)
    enrollment = EnrollmentFactory(
        campaign=campaign, status="scheduled", next_send_at=timezone.now() - timedelta(minutes=1)
    )
    (batch,) = schedule_due(now=timezone.now())
    assert batch.credential_id == good.pk
    assert SendClaim.objects.get(enrollment=enrollment).credential_id == good.pk
    assert Enrollment.objects.get(pk=enrollment.pk).status == "scheduled"


def test_the_campaign_setting_is_read_and_written(api_client, account):
    campaign = CampaignFactory(account=account)
    assert (
        api_client.get(f"/campaigns/{campaign.pk}").json()["require_authenticated_domain"] is False
    )
    response = api_client.patch(
        f"/campaigns/{campaign.pk}", {"require_authenticated_domain": True}, format="json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["require_authenticated_domain"] is True
    assert_fields(
        api_client.patch(
            f"/campaigns/{campaign.pk}", {"require_authenticated_domain": "yes"}, format="json"
        ),
        "require_authenticated_domain",
    )
