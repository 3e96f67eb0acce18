from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from accounts import (
            errors,  # noqa: F401 (registers its error codes)
            schema,  # noqa: F401 (registers the OpenAPI auth extension)
        )
