from django.urls import path

from accounts.api import ApiKeyViewSet, SignupView

urlpatterns = [
    path("signup", SignupView.as_view(), name="signup"),
    path("api_keys", ApiKeyViewSet.as_view({"get": "list", "post": "create"}), name="api-key-list"),
    path("api_keys/<str:pk>", ApiKeyViewSet.as_view({"delete": "destroy"}), name="api-key-detail"),
]
