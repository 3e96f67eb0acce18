"""gunicorn settings, read from the working directory (`gunicorn config.wsgi` run from
the repository root: the Procfile, `make run`, the README's production command).

Header limits: a header field up to 32 KB reaches the service, which answers what it
cannot use with the error envelope (an over-long `Authorization` is 401
invalid_api_key). Only past these limits does gunicorn itself answer, with its plain
431/400 page (docs/api.md "Limits").
"""

limit_request_field_size = 32768  # bytes per header field (gunicorn's default: 8190)
limit_request_line = 8190  # bytes of the request line (gunicorn's maximum)
limit_request_fields = 100  # header fields per request
