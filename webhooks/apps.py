from django.apps import AppConfig


class WebhooksConfig(AppConfig):
    name = "webhooks"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from config.metrics_scrape import state_reader_register
        from webhooks import (
            checks,  # noqa: F401 (registers the system checks)
            errors,  # noqa: F401 (registers its error codes)
            tasks,  # noqa: F401 (registers the drain task, which emission rings by name)
        )
        from webhooks.metrics import webhook_state_read

        state_reader_register(webhook_state_read)
