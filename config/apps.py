import logging

from django.apps import AppConfig
from django.conf import settings

logger = logging.getLogger("config.outbound")


class ConfigConfig(AppConfig):
    name = "config"
    verbose_name = "Service"

    def ready(self):
        if settings.OUTBOUND_PRIVATE_NETWORKS_BY_DEFAULT:
            logger.warning(
                "Embedded mode: OUTBOUND_ALLOW_PRIVATE_NETWORKS is on, so webhooks and "
                "mailboxes may reach loopback and private addresses. Set "
                "OUTBOUND_ALLOW_PRIVATE_NETWORKS=false to refuse them; production "
                "(DATABASE_URL set) refuses them unless it is set to true."
            )
