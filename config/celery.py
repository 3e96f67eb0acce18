import logging.config
import os

from celery import Celery
from celery.signals import setup_logging

import config.broker  # noqa: F401  (filesystem:// writes each message whole)
from config.startup import settings_load_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")


@app.on_configure.connect
def _settings_or_exit(sender, **kwargs) -> None:
    # Sent just before Celery reads the Django settings: a missing setting is one line.
    settings_load_or_exit("celery")


@setup_logging.connect
def _logging_from_django(**kwargs) -> None:
    # A receiver here tells Celery to leave logging alone: worker and beat log through
    # Django's LOGGING (config/logs.py), as the web does, whatever --loglevel says.
    from django.conf import settings

    logging.config.dictConfig(settings.LOGGING)


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()

import config.worker  # noqa: E402,F401  (connects the shutdown signal)
