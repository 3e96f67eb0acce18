from django.urls import path

from accounts import views
from accounts.api import ApiKeyViewSet, EmailVerificationView, SignupView
from accounts.audit_api import AuditEventViewSet

urlpatterns = [
    path("signup", SignupView.as_view(), name="signup"),
    path("signup/verification", EmailVerificationView.as_view(), name="signup-verification"),
    path("signup/verify/<str:token>", views.email_verify_page, name="signup-verify"),
    path("api_keys", ApiKeyViewSet.as_view({"get": "list", "post": "create"}), name="api-key-list"),
    path("api_keys/<str:pk>", ApiKeyViewSet.as_view({"delete": "destroy"}), name="api-key-detail"),
    path("audit_events", AuditEventViewSet.as_view({"get": "list"}), name="audit-event-list"),
]
