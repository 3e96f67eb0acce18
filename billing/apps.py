from django.apps import AppConfig


class BillingConfig(AppConfig):
    name = "billing"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from accounts.services import signup_step_register
        from billing import errors  # noqa: F401 (registers its error codes)
        from billing.customers import signup_customer_create

        signup_step_register(signup_customer_create)
