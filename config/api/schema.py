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


def close_request_bodies(
    result: dict[str, Any], generator: Any, request: Any, public: bool
) -> dict[str, Any]:
    """Marks every request body object closed (`additionalProperties: false`), as the
    serializers are (config.api.serializers.StrictFieldsMixin): the request components
    (`...Request`, COMPONENT_SPLIT_REQUEST) and the objects nested in them, and inline
    request schemas. An object schema that already says what extra keys may hold (a
    map such as a contact's `fields`) keeps its own rule."""
    components = result.get("components", {}).get("schemas", {})

    def close(schema: Any) -> None:
        if isinstance(schema, list):
            for item in schema:
                close(item)
            return
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            return  # components are closed where they are defined
        if schema.get("type") == "object" and "properties" in schema:
            schema.setdefault("additionalProperties", False)
        for key in ("properties", "items", "allOf", "oneOf", "anyOf"):
            value = schema.get(key)
            if key == "properties" and isinstance(value, dict):
                for child in value.values():
                    close(child)
            elif value is not None:
                close(value)

    for name, schema in components.items():
        if name.endswith("Request"):
            close(schema)
    for path_item in result.get("paths", {}).values():
        for operation in path_item.values():
            if not isinstance(operation, dict):
                continue
            for media in operation.get("requestBody", {}).get("content", {}).values():
                close(media.get("schema"))
    return result
