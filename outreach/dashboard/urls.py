"""The staff dashboard's route, mounted at `/admin/dashboard/` (config/urls.py) inside the
admin's login and staff check."""

from django.contrib import admin
from django.urls import path

from outreach.dashboard.views import dashboard_view

urlpatterns = [path("", admin.site.admin_view(dashboard_view), name="admin-dashboard")]
