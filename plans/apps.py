from django.apps import AppConfig
from django.db.models.signals import post_migrate


class PlansConfig(AppConfig):
    name = "plans"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from plans.catalog import catalog_ensure_after_migrate

        post_migrate.connect(
            catalog_ensure_after_migrate, sender=self, dispatch_uid="plans.catalog"
        )
