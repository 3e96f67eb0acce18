from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from webhooks import (
            checks,  # noqa: F401 (registers the system checks)
            errors,  # noqa: F401 (registers its error codes)
        )
