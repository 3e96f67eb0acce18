from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.api import views
from config.metrics_scrape import metrics_view

# The admin's "View site" link: the API's browsable docs (the root is a small index).
admin.site.site_url = "/docs"
# The product's name on every admin page (Django's default says "Django administration").
admin.site.site_header = "Outreach Service"
admin.site.site_title = "Outreach Service admin"
admin.site.index_title = "Back office"
# No sidebar of every model beside each page: at 1280 px it left the lists 630 px (the
# breadcrumbs and the index lead to the other pages).
admin.site.enable_nav_sidebar = False

urlpatterns = [
    path("", views.root_index, name="root"),
    path("admin", RedirectView.as_view(url="/admin/", permanent=True)),
    # Before the admin's own routes, which answer every other path under admin/.
    path("admin/dashboard/", include("outreach.dashboard.urls")),
    path("admin/", admin.site.urls),
    path("health", views.HealthView.as_view(), name="health"),
    path("metrics", metrics_view, name="metrics"),
    path("schema", SpectacularAPIView.as_view(), name="schema"),
    path("docs", SpectacularSwaggerView.as_view(url_name="schema"), name="docs"),
    path("docs/errors", views.error_index_page, name="error-index"),
    path("docs/errors/<str:code>", views.error_code_page, name="error-code"),
    # The human pages also answer with a trailing slash (the API's paths never take one).
    path("docs/", RedirectView.as_view(url="/docs", permanent=True)),
    path("docs/errors/", RedirectView.as_view(url="/docs/errors", permanent=True)),
    path(
        "docs/errors/<str:code>/", RedirectView.as_view(url="/docs/errors/%(code)s", permanent=True)
    ),
    path("", include("plans.urls")),
    path("", include("accounts.urls")),
    path("", include("billing.urls")),
    path("", include("webhooks.urls")),
    path("", include("outreach.urls")),
]

handler400 = "config.api.handlers.bad_request"
handler403 = "config.api.handlers.permission_denied"
handler404 = "config.api.handlers.not_found"
handler500 = "config.api.handlers.server_error"
