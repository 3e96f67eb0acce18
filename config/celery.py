import os

from celery import Celery

from config.startup import settings_load_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

app = Celery("config")


@app.on_configure.connect
def _settings_or_exit(sender, **kwargs) -> None:
    # Sent just before Celery reads the Django settings: a missing setting is one line.
    settings_load_or_exit("celery")


app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
