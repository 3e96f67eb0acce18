"""gunicorn's configuration: `gunicorn config.wsgi -c config/gunicorn.py` (the Procfile's
web line). Bind address and worker count stay on the command line.

Its error and access logs use the service's format (LOG_FORMAT=json included) and
redaction (config.logs): an access line never shows an open-tracking or unsubscribe
token. Without this file gunicorn logs in its own format and unredacted.
"""

import os

from gunicorn.glogging import Logger

from config.logs import ACCESS_LOG_FORMAT, RedactFilter, formatter

accesslog = "-"
access_log_format = ACCESS_LOG_FORMAT
loglevel = os.environ.get("LOG_LEVEL", "info").lower()
# No control socket: its default path ($HOME/.gunicorn/gunicorn.ctl) is one per user, so
# a second gunicorn on the machine would take over the first one's.
control_socket_disable = True


class ServiceLogger(Logger):
    """gunicorn's logs with the service's formatter and redaction."""

    def setup(self, cfg) -> None:
        super().setup(cfg)
        # The settings read LOG_FORMAT the same way; the master does not load them.
        json_format = os.environ.get("LOG_FORMAT", "plain").lower() == "json"
        for log in (self.error_log, self.access_log):
            for handler in log.handlers:
                handler.setFormatter(formatter(json_format))
                handler.addFilter(RedactFilter())


logger_class = ServiceLogger
