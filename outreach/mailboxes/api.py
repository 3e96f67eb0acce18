"""API: SMTP credentials (mailboxes), their check and the OAuth start."""

from django.db import transaction
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status
from rest_framework.decorators import action
from rest_framework.response import Response

from config.api.audit import audit_now, network_first
from config.api.viewsets import AccountScopedViewSet, no_request_body
from outreach.errors import CredentialNotFound
from outreach.mailboxes import oauth as mailboxes_oauth
from outreach.mailboxes import services
from outreach.mailboxes.check import credential_verify
from outreach.mailboxes.serializers import (
    CredentialCreatedSerializer,
    CredentialSerializer,
    MailboxVerificationSerializer,
    OAuthStartedSerializer,
    OAuthStartSerializer,
    SimulatorCreateSerializer,
)
from outreach.models.mailboxes import SmtpCredential


class CredentialViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    """Mailboxes the account sends from. Passwords and signing keys are write-only."""

    queryset = SmtpCredential.objects.all()
    serializer_class = CredentialSerializer
    not_found_error = CredentialNotFound
    audit_actions = {"simulator": "smtp_credential.create", "oauth": "smtp_credential.connect"}
    http_method_names = ["get", "post", "patch", "delete"]

    def get_queryset(self):
        return (
            super()
            .get_queryset()
            .prefetch_related("provider_pauses")
            .order_by("-created_at", "-pk")
        )

    @extend_schema(responses={201: CredentialCreatedSerializer})
    @network_first
    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # The mailbox commits with its audit row first; the check then logs in with no
        # transaction open, and records nothing (docs/outreach.md, docs/audit.md).
        with transaction.atomic():
            credential = services.credential_create(
                account=request.user, data=serializer.validated_data
            )
            body = self.get_serializer(credential).data
            audit_now(self, request, Response(body, status=status.HTTP_201_CREATED))
        body["verification"] = credential_verify(credential=credential)
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=OAuthStartSerializer,
        responses={201: OAuthStartedSerializer},
        summary="Connect a Google or Microsoft mailbox (OAuth 2.0)",
        description="Starts connecting a mailbox. Send the mailbox's owner to "
        "`authorization_url`: the service's page naming this account, whose button starts "
        "the provider's authorization code flow (PKCE, offline access, the mail scopes). After "
        "consent the provider returns to `GET /oauth/callback/<provider>` (in the same "
        "browser), which creates the credential "
        "(SMTP and IMAP hosts preset, `auth_method` `oauth_google` / `oauth_microsoft`), or "
        "re-authorizes the account's mailbox with that address. 422 `oauth_not_configured` "
        "when the service has no OAuth client for the provider.",
    )
    @action(detail=False, methods=["post"], url_path="oauth")
    def oauth(self, request):
        serializer = OAuthStartSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = dict(serializer.validated_data)
        url, expires_at = mailboxes_oauth.authorization_start(
            account=request.user, provider_name=data.pop("provider"), credential_settings=data
        )
        body = OAuthStartedSerializer({"authorization_url": url, "expires_at": expires_at}).data
        return Response(body, status=status.HTTP_201_CREATED)

    @extend_schema(
        request=SimulatorCreateSerializer,
        responses={201: CredentialSerializer},
        summary="Create a simulator mailbox",
        description="A mailbox that never opens a connection: its messages are answered by "
        "the mailbox simulator by recipient (addresses at `simulator.test`, the outcome after "
        "a `+`), recorded as any send and not counted in the period's usage "
        "(SIMULATOR_DAILY_LIMIT a day per account). `auth_method` `simulator`; unpaced "
        "unless given a pace (docs/sandbox.md).",
    )
    @action(detail=False, methods=["post"], url_path="simulator")
    def simulator(self, request):
        serializer = SimulatorCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        credential = services.simulator_create(account=request.user, data=serializer.validated_data)
        return Response(self.get_serializer(credential).data, status=status.HTTP_201_CREATED)

    @no_request_body
    @extend_schema(
        request=None,
        responses=MailboxVerificationSerializer,
        summary="Check the mailbox now",
        description="Connects and logs in to the SMTP server, and to the IMAP server when "
        "imap_host is set, as sending and reply polling do. Sends nothing, changes nothing. "
        "Answers within MAILBOX_VERIFY_TIMEOUT_SECONDS (15 s by default).",
    )
    @action(detail=True, methods=["post"])
    @network_first
    def verify(self, request, pk=None):
        return Response(credential_verify(credential=self.get_object()))

    @network_first
    def partial_update(self, request, pk=None):
        credential = self.get_object()
        # A new smtp_host or imap_host is resolved (the outbound guard's check) with no
        # transaction open; the change, made on the row as it is then, commits with its
        # audit row in one short transaction (docs/audit.md).
        serializer = self.get_serializer(credential, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        with transaction.atomic():
            credential = services.credential_update(
                credential=credential, data=serializer.validated_data
            )
            response = Response(self.get_serializer(credential).data)
            audit_now(self, request, response)
        return response
