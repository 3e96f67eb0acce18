import re

from django.conf import settings
from django.http import JsonResponse

from config.api.errors import COMPACT, error_body

RELAY_PATH_PREFIX = "/inbound/relay/"
# POST /smtp_credentials/<id>/inbound: a whole message in a JSON string.
INBOUND_PATH = re.compile(r"^/smtp_credentials/[^/]+/inbound$")


class BodySizeLimitMiddleware:
    """413 payload_too_large before the body is read: CSV uploads (multipart) and
    relay providers' event batches may be larger than API JSON bodies."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        content_type = request.META.get("CONTENT_TYPE", "")
        if content_type.startswith("multipart/"):
            limit = settings.MAX_UPLOAD_BODY_BYTES
        elif request.path_info.startswith(RELAY_PATH_PREFIX):
            limit = settings.MAX_RELAY_BODY_BYTES  # a provider's batch of events
        elif INBOUND_PATH.match(request.path_info):
            # A message of IMAP_MAX_MESSAGE_BYTES, its line breaks and quotes escaped in
            # JSON (the view answers 413 for the message itself past that size).
            limit = min(
                settings.MAX_UPLOAD_BODY_BYTES,
                max(settings.MAX_JSON_BODY_BYTES, 2 * settings.IMAP_MAX_MESSAGE_BYTES + 4096),
            )
        else:
            limit = settings.MAX_JSON_BODY_BYTES
        if length > limit:
            body = error_body(
                "payload_too_large",
                f"The request body is {length} bytes; the limit is {limit} bytes.",
                {"limit_bytes": limit},
            )
            return JsonResponse(body, status=413, json_dumps_params=COMPACT)
        return self.get_response(request)


class QueryNulMiddleware:
    """422 validation_failed for a NUL character in a query parameter's name or value:
    PostgreSQL cannot compare text holding one (the filter would be a 500), and no
    parameter of this API has a use for it."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if "%00" in request.META.get("QUERY_STRING", "") or "\x00" in request.META.get(
            "QUERY_STRING", ""
        ):
            for name, values in request.GET.lists():
                if "\x00" in name or any("\x00" in value for value in values):
                    field = name.replace("\x00", "\\u0000")
                    message = "Null characters are not allowed."
                    body = error_body(
                        "validation_failed",
                        f"{field}: {message}",
                        {"fields": {field: [message]}},
                    )
                    return JsonResponse(body, status=422, json_dumps_params=COMPACT)
        return self.get_response(request)


class AllowHeaderMiddleware:
    """OPTIONS is answered 405 like any undocumented method (DEFAULT_METADATA_CLASS is
    None), so it is not listed in `Allow` either."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        allow = response.get("Allow")
        if allow and "OPTIONS" in allow:
            methods = [m.strip() for m in allow.split(",") if m.strip() != "OPTIONS"]
            response["Allow"] = ", ".join(methods)
        return response
