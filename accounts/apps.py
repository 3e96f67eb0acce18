from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from accounts import (
            errors,  # noqa: F401 (registers its error codes)
            schema,  # noqa: F401 (registers the OpenAPI auth extension)
        )
        from accounts.audit import audit_event_write
        from config.api.audit import register_writer

        register_writer(audit_event_write)  # the audit rows of API and admin changes
