"""Serializers of the sender domain checks and of the tracking domain
(docs/deliverability.md)."""

import re

from django.conf import settings
from rest_framework import serializers

from config.api.fields import TimestampField
from config.api.serializers import StrictSerializer
from outreach.domains.sender import DKIM_SELECTORS_MAX
from outreach.models.domains import SenderDomainCheck

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


# --- tracking domain -----------------------------------------------------------------------


class TrackingDomainSerializer(StrictSerializer):
    domain = serializers.CharField(allow_null=True, read_only=True)
    status = serializers.ChoiceField(
        choices=["pending", "verified", "failed"],
        allow_null=True,
        read_only=True,
        help_text="`verified`: pixels and click links use it; `failed`: DNS shows no CNAME to "
        "the service's host, or (before it is verified) no TXT record naming this account "
        "(links use the service's host); `pending`: not known yet.",
    )
    checked_at = TimestampField(allow_null=True, read_only=True)
    cname_target = serializers.CharField(
        read_only=True, help_text="The name the domain must be a CNAME to."
    )
    txt_name = serializers.CharField(
        allow_null=True,
        read_only=True,
        help_text="The name of the TXT record that proves the domain is this account's "
        "(`_outreach-verify.<domain>`); null without a domain.",
    )
    txt_value = serializers.CharField(
        read_only=True,
        help_text="The value of that TXT record (`outreach-verification=<token>`), the "
        "same for every domain of the account.",
    )


class TrackingDomainSetSerializer(StrictSerializer):
    domain = serializers.CharField(
        allow_null=True,
        allow_blank=True,
        max_length=253,
        help_text="A host of the account's (e.g. track.example.com), a CNAME to "
        "`cname_target` with a TXT record `txt_name` = `txt_value`; null or empty removes it.",
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
