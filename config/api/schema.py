"""drf-spectacular hook: the error envelope as a component, on every operation."""

from typing import Any

from config.api.errors import ERROR_CODES


def error_schema() -> dict[str, Any]:
    """The envelope's schema; read when the schema is built, once every app's error
    codes are registered."""
    return {
        "type": "object",
        "required": ["code", "type", "message"],
        "properties": {
            "code": {"type": "string", "enum": sorted(ERROR_CODES)},
            "type": {"type": "string", "format": "uri"},
            "message": {"type": "string"},
            "details": {"type": "object", "additionalProperties": True},
        },
    }


def add_error_envelope(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    components = result.setdefault("components", {}).setdefault("schemas", {})
    components["Error"] = error_schema()
    ref = {"$ref": "#/components/schemas/Error"}
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            operation["responses"].setdefault(
                "default",
                {"description": "Error envelope", "content": {"application/json": {"schema": ref}}},
            )
    return result
