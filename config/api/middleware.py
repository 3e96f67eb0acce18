from django.conf import settings
from django.http import JsonResponse

from config.api.errors import COMPACT, error_body

RELAY_PATH_PREFIX = "/inbound/relay/"


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
