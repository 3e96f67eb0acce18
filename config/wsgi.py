import os

from django.core.wsgi import get_wsgi_application

from config.startup import settings_load_or_exit

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
# Exit status 4 is gunicorn's "App failed to load": its master stops instead of
# starting worker after worker.
settings_load_or_exit("gunicorn", status=4)
application = get_wsgi_application()
