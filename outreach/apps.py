from django.apps import AppConfig


class OutreachConfig(AppConfig):
    name = "outreach"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config.metrics_scrape import state_reader_register
        from outreach import errors  # noqa: F401 (registers its error codes)
        from outreach.metrics import outreach_state_read

        state_reader_register(outreach_state_read)
