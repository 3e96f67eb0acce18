from django.apps import AppConfig


class OutreachConfig(AppConfig):
    name = "outreach"
    default_auto_field = "django.db.models.BigAutoField"
