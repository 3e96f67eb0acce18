"""gunicorn's configuration: `gunicorn config.wsgi -c config/gunicorn.py` (the Procfile's
web line). Bind address and worker count stay on the command line.

Its error and access logs use the service's format (LOG_FORMAT=json included) and
redaction (config.logs): an access line never shows an open-tracking or unsubscribe
token. Without this file gunicorn logs in its own format and unredacted.

Workers: gthread's, a pool of WEB_THREADS threads in each process, with what reaches the
threads bounded (config/gunicorn_worker.py): an idle connection, or one sending its
headers slowly, waits in the worker's event loop, not on a thread.

Header limits: a header field up to 32 KB reaches the service, which answers what it
cannot use with the error envelope (an over-long `Authorization` is 401
invalid_api_key). Only past these limits does gunicorn itself answer, with its plain
431/400 page (docs/api.md "Limits of the server").
"""

import os

from gunicorn.glogging import Logger

from config.gunicorn_worker import WebWorker
from config.logs import ACCESS_LOG_FORMAT, RedactFilter, formatter
from config.metrics_folder import metrics_folder_prepare, var_dir
from config.request_id import RequestIdFilter

worker_class = WebWorker
# Requests each process serves at once; each thread keeps its own database connection.
threads = int(os.environ.get("WEB_THREADS", "8"))
# Seconds a connection may wait for its first or next request.
keepalive = int(os.environ.get("WEB_KEEPALIVE_SECONDS", "5"))
# Seconds a request's headers may take to arrive (from their first byte), and each read
# of its body or write of its response.
WebWorker.client_timeout = float(os.environ.get("WEB_CLIENT_TIMEOUT_SECONDS", "10"))
# A worker whose event loop has not reported for this long is restarted. Not a limit on
# a request's time: the loop reports while its threads serve requests.
timeout = 30

limit_request_field_size = 32768  # bytes per header field (gunicorn's default: 8190)
limit_request_line = 8190  # bytes of the request line (gunicorn's maximum)
limit_request_fields = 100  # header fields per request

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
                handler.addFilter(RequestIdFilter())


logger_class = ServiceLogger


# The folder every process writes its metrics to (config/metrics_folder.py): settled
# here in the master, so its workers inherit it and child_exit below knows it.
METRICS_DIR = metrics_folder_prepare(var_dir())


def child_exit(server, worker) -> None:
    """A worker ended (restarted, or the server stops): its live gauges stop counting
    (config/metrics.py). The master imports no metric itself, so it writes no files."""
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid, path=str(METRICS_DIR))
