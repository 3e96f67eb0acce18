"""Query parameters as the schema types them: strictly (docs/api.md, "Strict
requests"), as request bodies are (config.api.serializers)."""

import re

from config.api.errors import ValidationFailed

_INTEGER = re.compile(r"-?[0-9]+")


def query_bool(request, name: str) -> bool | None:
    """`true` or `false` (any case); None when absent or empty. Anything else, `1`
    and `0` included, is validation_failed naming the parameter."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if raw.lower() == "true":
        return True
    if raw.lower() == "false":
        return False
    raise ValidationFailed({name: ["Must be true or false."]})


def query_int(request, name: str) -> int | None:
    """A decimal integer (ASCII digits, an optional minus; no spaces, signs, `_` or
    other scripts' digits, which Python's int() would take); None when absent or empty."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return None
    if not _INTEGER.fullmatch(raw):
        raise ValidationFailed({name: ["Must be an integer."]})
    return int(raw)
