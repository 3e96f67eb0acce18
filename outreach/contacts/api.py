"""API: contacts and contact imports (an outreach, a contact enrolled and dispatched in one
call, is campaigns' API)."""

import json

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import mixins, serializers, status
from rest_framework.parsers import MultiPartParser
from rest_framework.response import Response

from accounts.idempotency import idempotent
from config.api.pagination import StartingAfterPagination
from config.api.parsers import RowsJSONParser
from config.api.query import query_bool
from config.api.viewsets import AccountScopedViewSet
from outreach import enrollments
from outreach.contacts import import_queue, selectors, services
from outreach.contacts.data import contact_data_clean
from outreach.contacts.serializers import (
    ContactImportJsonSerializer,
    ContactImportSerializer,
    ContactImportUploadSerializer,
    ContactSerializer,
)
from outreach.errors import ContactImportNotFound, ContactNotFound
from outreach.models.contacts import Contact, ContactImport


class ContactViewSet(
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    AccountScopedViewSet,
):
    queryset = Contact.objects.all()
    serializer_class = ContactSerializer
    not_found_error = ContactNotFound
    pagination_class = StartingAfterPagination
    http_method_names = ["get", "post", "patch", "delete"]

    @extend_schema(
        parameters=[
            OpenApiParameter("email", OpenApiTypes.STR, description="Exact, case-insensitive."),
            OpenApiParameter("unsubscribed", OpenApiTypes.BOOL),
            OpenApiParameter("bounced", OpenApiTypes.BOOL),
        ]
    )
    def list(self, request):
        queryset = self.get_queryset()
        email = request.query_params.get("email")
        if email:
            queryset = queryset.filter(email_lower=email.strip().lower())
        unsubscribed = query_bool(request, "unsubscribed")
        if unsubscribed is not None:
            queryset = queryset.filter(unsubscribed_at__isnull=not unsubscribed)
        bounced = query_bool(request, "bounced")
        if bounced is not None:
            queryset = queryset.filter(bounced_at__isnull=not bounced)
        page = self.paginate_queryset(queryset)
        return self.get_paginated_response(ContactSerializer(page, many=True).data)

    def perform_destroy(self, instance):
        enrollments.contact_delete(contact=instance)

    def create(self, request):
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        contact = services.contact_create(
            account=request.user, data=contact_data_clean(serializer.validated_data)
        )
        return Response(ContactSerializer(contact).data, status=status.HTTP_201_CREATED)

    def partial_update(self, request, pk=None):
        contact = self.get_object()
        serializer = self.get_serializer(contact, data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        contact = services.contact_update(contact=contact, changes=serializer.validated_data)
        return Response(ContactSerializer(contact).data)


class ContactImportViewSet(
    mixins.RetrieveModelMixin,
    AccountScopedViewSet,
):
    queryset = ContactImport.objects.defer("source_data")
    serializer_class = ContactImportSerializer
    not_found_error = ContactImportNotFound
    pagination_class = StartingAfterPagination
    parser_classes = [RowsJSONParser, MultiPartParser]
    http_method_names = ["get", "post"]

    def list(self, request):
        page = self.paginate_queryset(self.get_queryset())
        return self.get_paginated_response(ContactImportSerializer(page, many=True).data)

    @extend_schema(
        request={
            "application/json": ContactImportJsonSerializer,
            "multipart/form-data": ContactImportUploadSerializer,
        },
        responses={201: ContactImportSerializer},
    )
    @idempotent
    def create(self, request):
        serializer: serializers.Serializer
        if request.content_type.startswith("multipart/"):
            serializer = ContactImportUploadSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            upload = serializer.validated_data["file"]
            source_format, data, filename = "csv", upload.read(), upload.name or ""
        else:
            serializer = ContactImportJsonSerializer(data=request.data)
            serializer.is_valid(raise_exception=True)
            source_format = "json"
            data = json.dumps(serializer.validated_data["contacts"]).encode()
            filename = ""
        campaign = selectors.requested_campaign(
            account=request.user, campaign_id=serializer.validated_data.get("campaign_id")
        )
        contact_import = import_queue.contact_import_create(
            account=request.user,
            source_format=source_format,
            data=data,
            campaign=campaign,
            filename=filename,
        )
        return Response(
            ContactImportSerializer(contact_import).data, status=status.HTTP_201_CREATED
        )
