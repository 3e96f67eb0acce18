"""API: a mailbox's From domain check (`/smtp_credentials/:id/domain_check`) and the
account's tracking domain (`/tracking_domain`)."""

import re

from django.conf import settings
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from config.api.fields import TimestampField
from config.api.serializers import StrictSerializer
from config.api.viewsets import AccountScopedMixin, RateLimitHeadersMixin, ServiceAPIView
from outreach.domains import services
from outreach.domains.sender import DKIM_SELECTORS_MAX
from outreach.errors import CredentialNotFound
from outreach.models.domains import SenderDomainCheck
from outreach.models.mailboxes import SmtpCredential

_LABEL = r"[a-z0-9](?:[a-z0-9_-]{0,61}[a-z0-9])?"
_SELECTOR = re.compile(rf"^{_LABEL}(?:\.{_LABEL})*$", re.IGNORECASE)
_HOSTNAME = re.compile(rf"^{_LABEL}(?:\.{_LABEL})+$")


class FindingSerializer(StrictSerializer):
    code = serializers.CharField(
        help_text="e.g. spf_missing, spf_multiple, spf_syntax, spf_too_many_lookups, "
        "spf_allows_all, dkim_not_found, dkim_revoked, dmarc_missing, dmarc_multiple, "
        "dmarc_invalid, dmarc_policy_none, dmarc_strict_alignment, mx_missing, mx_null, "
        "dns_lookup_failed."
    )
    level = serializers.ChoiceField(choices=["error", "warning"])
    message = serializers.CharField()


class DomainCheckSerializer(StrictSerializer):
    credential_id = serializers.UUIDField()
    domain = serializers.CharField()
    status = serializers.ChoiceField(
        choices=["pending", *SenderDomainCheck.Status.values],
        help_text="`pending` before the first check; else the worst finding's level, or `pass`.",
    )
    checked_at = TimestampField(allow_null=True)
    findings = FindingSerializer(many=True)
    records = serializers.JSONField(
        help_text="What DNS answered: {spf, dmarc, dkim_selectors (those with a key), mx}."
    )
    dkim_selectors = serializers.ListField(
        child=serializers.CharField(), help_text="The selectors the account named."
    )


class DomainCheckRunSerializer(StrictSerializer):
    dkim_selectors = serializers.ListField(
        child=serializers.CharField(max_length=63),
        required=False,
        max_length=DKIM_SELECTORS_MAX,
        help_text="DKIM selectors to look up besides google, selector1 and selector2 (kept "
        "for the daily checks); omitted: the ones named before.",
    )

    def validate_dkim_selectors(self, value):
        bad = [s for s in value if not _SELECTOR.match(s)]
        if bad:
            raise serializers.ValidationError(f"Not a DKIM selector: {bad[0][:63]!r}.")
        return list(dict.fromkeys(s.lower() for s in value))


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


class DomainCheckView(AccountScopedMixin, RateLimitHeadersMixin, GenericAPIView):
    """The mailbox's From domain check: SPF, DKIM, DMARC, MX (docs/deliverability.md)."""

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
    def post(self, request, pk=None):
        credential = self.get_object()
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        check = services.sender_domain_check_run(
            credential=credential, dkim_selectors=serializer.validated_data.get("dkim_selectors")
        )
        return Response(DomainCheckSerializer(_check_body(credential, check)).data)


# --- tracking domain -----------------------------------------------------------------------


class TrackingDomainSerializer(StrictSerializer):
    domain = serializers.CharField(allow_null=True, read_only=True)
    status = serializers.ChoiceField(
        choices=["pending", "verified", "failed"],
        allow_null=True,
        read_only=True,
        help_text="`verified`: pixels and click links use it; `failed`: DNS shows no CNAME to "
        "the service's host (links use the service's host); `pending`: not known yet.",
    )
    checked_at = TimestampField(allow_null=True, read_only=True)
    cname_target = serializers.CharField(
        read_only=True, help_text="The name the domain must be a CNAME to."
    )


class TrackingDomainSetSerializer(StrictSerializer):
    domain = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        max_length=253,
        help_text="A host of the account's (e.g. track.example.com), a CNAME to "
        "`cname_target`; null or empty removes it.",
    )

    def validate_domain(self, value):
        value = (value or "").strip().lower().rstrip(".")
        if not value:
            return ""
        if not _HOSTNAME.match(value) or value.replace(".", "").isdigit():
            raise serializers.ValidationError("Not a host name (e.g. track.example.com).")
        if value == settings.TRACKING_DOMAIN_CNAME_TARGET:
            raise serializers.ValidationError("This is the service's own host.")
        return value


def _tracking_body(account) -> dict:
    return {
        "domain": account.tracking_domain or None,
        "status": account.tracking_domain_status or None,
        "checked_at": account.tracking_domain_checked_at,
        "cname_target": settings.TRACKING_DOMAIN_CNAME_TARGET,
    }


class TrackingDomainView(ServiceAPIView):
    """The account's tracking domain (docs/deliverability.md, "Tracking domain")."""

    @extend_schema(responses=TrackingDomainSerializer, summary="The account's tracking domain")
    def get(self, request):
        return Response(TrackingDomainSerializer(_tracking_body(request.user)).data)

    @extend_schema(
        request=TrackingDomainSetSerializer,
        responses=TrackingDomainSerializer,
        summary="Set or remove the account's tracking domain",
        description="Sets the host of the account's open pixels and click links, and checks "
        "its CNAME at once; it is used only once `verified` (beat checks again hourly).",
    )
    def put(self, request):
        serializer = TrackingDomainSetSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        account = services.tracking_domain_set(
            account=request.user, domain=serializer.validated_data["domain"]
        )
        return Response(TrackingDomainSerializer(_tracking_body(account)).data)
