"""API: a mailbox's From domain check (`/smtp_credentials/:id/domain_check`) and the
account's tracking domain (`/tracking_domain`)."""

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from config.api.audit import AuditMixin, audit_now, network_first
from config.api.viewsets import AccountScopedMixin, RateLimitHeadersMixin, ServiceAPIView
from outreach.domains import services, tracking
from outreach.domains.serializers import (
    DomainCheckRunSerializer,
    DomainCheckSerializer,
    TrackingDomainSerializer,
    TrackingDomainSetSerializer,
)
from outreach.errors import CredentialNotFound
from outreach.models.domains import SenderDomainCheck
from outreach.models.mailboxes import SmtpCredential


def _check_body(credential: SmtpCredential, check: SenderDomainCheck | None) -> dict:
    if check is None:
        return {
            "credential_id": credential.pk,
            "domain": credential.from_email.rpartition("@")[2].lower(),
            "status": "pending",
            "checked_at": None,
            "findings": [],
            "records": {},
            "dkim_selectors": [],
        }
    return {
        "credential_id": credential.pk,
        "domain": check.domain,
        "status": check.status,
        "checked_at": check.checked_at,
        "findings": check.findings,
        "records": check.records,
        "dkim_selectors": check.dkim_selectors,
    }


class DomainCheckView(AuditMixin, AccountScopedMixin, RateLimitHeadersMixin, GenericAPIView):
    """The mailbox's From domain check: SPF, DKIM, DMARC, MX (docs/deliverability.md)."""

    audit_actions = {"post": "smtp_credential.domain_check"}

    queryset = SmtpCredential.objects.select_related("domain_check")
    not_found_error = CredentialNotFound
    serializer_class = DomainCheckRunSerializer

    @extend_schema(
        responses=DomainCheckSerializer,
        summary="The mailbox's From domain check",
        description="The last check of the mailbox's From domain (beat checks every mailbox "
        "daily), with its findings; `status: pending` before the first.",
    )
    def get(self, request, pk=None):
        credential = self.get_object()
        check = getattr(credential, "domain_check", None)
        return Response(DomainCheckSerializer(_check_body(credential, check)).data)

    @extend_schema(
        request=DomainCheckRunSerializer,
        responses=DomainCheckSerializer,
        summary="Check the mailbox's From domain now",
        description="Looks up SPF, DKIM (the named selectors and Google's and Microsoft's "
        "usual ones), DMARC and MX of the From domain now, stores and answers the result. "
        "A lookup that times out is a warning, not an error.",
    )
    @network_first
    def post(self, request, pk=None):
        credential = self.get_object()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        check = services.sender_domain_check_run(
            credential=credential, dkim_selectors=serializer.validated_data.get("dkim_selectors")
        )
        return Response(DomainCheckSerializer(_check_body(credential, check)).data)


def _tracking_body(account) -> dict:
    txt_name, txt_value = tracking.verification_record(account.pk, account.tracking_domain)
    return {
        "domain": account.tracking_domain or None,
        "status": account.tracking_domain_status or None,
        "checked_at": account.tracking_domain_checked_at,
        "cname_target": settings.TRACKING_DOMAIN_CNAME_TARGET,
        "txt_name": txt_name,
        "txt_value": txt_value,
    }


class TrackingDomainView(ServiceAPIView):
    """The account's tracking domain (docs/deliverability.md, "Tracking domain")."""

    audit_actions = {"put": "tracking_domain.update"}

    @extend_schema(responses=TrackingDomainSerializer, summary="The account's tracking domain")
    def get(self, request):
        return Response(TrackingDomainSerializer(_tracking_body(request.user)).data)

    @extend_schema(
        request=TrackingDomainSetSerializer,
        responses=TrackingDomainSerializer,
        summary="Set or remove the account's tracking domain",
        description="Sets the host of the account's open pixels and click links, and checks "
        "its CNAME and its TXT record (`txt_name`, `txt_value`: the proof the domain is this "
        "account's) at once; it is used only once `verified` (beat checks again hourly, "
        "and a verified domain daily, by its CNAME alone). A domain another account holds "
        "is taken over once this account's TXT record is there and, if that account's "
        "domain is verified, its own TXT record is not; until then: 422.",
    )
    @network_first
    def put(self, request):
        serializer = TrackingDomainSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)

        def written(account) -> None:  # the row, in the change's transaction
            body = TrackingDomainSerializer(_tracking_body(account)).data
            audit_now(self, request, Response(body))

        account = services.tracking_domain_set(
            account=request.user, domain=serializer.validated_data["domain"], written=written
        )
        return Response(TrackingDomainSerializer(_tracking_body(account)).data)
