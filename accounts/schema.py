"""drf-spectacular: describe ApiKeyAuthentication as the `bearer` security scheme."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "accounts.authentication.ApiKeyAuthentication"
    name = "bearer"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An API key: `Authorization: Bearer ak_live_...`.",
        }

    def get_security_requirement(self, auto_schema):
        # SPECTACULAR_SETTINGS["SECURITY"] already requires `bearer` on every
        # operation; listing it again would duplicate it.
        return None
