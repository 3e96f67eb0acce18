from django.apps import AppConfig


class OutreachConfig(AppConfig):
    name = "outreach"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from outreach import errors  # noqa: F401 (registers its error codes)
