import logging
import os

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("config.outbound")


class ConfigConfig(AppConfig):
    name = "config"
    verbose_name = "Service"

    def ready(self):
        # Said once at start: by `make run`'s banner, which marks the processes it starts
        # (STARTUP_BANNER_SHOWN), or else by each process started on its own.
        if settings.OUTBOUND_PRIVATE_NETWORKS_BY_DEFAULT and not os.environ.get(
            "STARTUP_BANNER_SHOWN"
        ):
            logger.warning(
                "Embedded mode: OUTBOUND_ALLOW_PRIVATE_NETWORKS is on, so webhooks and "
                "mailboxes may reach loopback and private addresses. Set "
                "OUTBOUND_ALLOW_PRIVATE_NETWORKS=false to refuse them; production "
                "(DATABASE_URL set) refuses them unless it is set to true."
            )
