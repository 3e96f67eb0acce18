"""The API's serializer bases: strict request bodies (StrictSerializer,
StrictModelSerializer: every serializer of the API stands on one of them), and
representation without copying fields for responses on hot paths.

Responses on hot paths:

DRF deep-copies a serializer's declared fields and binds the copies every time a
serializer is instantiated: for a short list response that copying costs more than
the query behind it. `RepresentationMixin` reuses the bound fields of one instance
per class instead. It is for serializers that only represent objects and whose
fields need nothing from `context` (no request-dependent URLs, no per-request
choices): once bound, such fields keep no state of their own between objects.
"""

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING

from django.core.serializers.json import DjangoJSONEncoder
from django.http import QueryDict
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject
from rest_framework.settings import api_settings

if TYPE_CHECKING:
    from rest_framework.serializers import Serializer

    _SerializerBase = Serializer  # what the mixin is mixed into
else:
    _SerializerBase = object


class RepresentationMixin(_SerializerBase):
    # Fields the class's to_representation fills itself (from annotations, say).
    representation_skip: tuple[str, ...] = ()
    # Set on each class on first use (representation_fields).
    _representation_fields: tuple

    @classmethod
    def representation_fields(cls) -> tuple:
        fields = cls.__dict__.get("_representation_fields")  # this class's own, never a parent's
        if fields is None:
            fields = tuple(
                field
                for name, field in cls().fields.items()
                if not field.write_only and name not in cls.representation_skip
            )
            cls._representation_fields = fields
        return fields

    def to_representation(self, instance):
        # DRF's Serializer.to_representation, over the shared bound fields.
        ret = {}
        for field in self.representation_fields():
            try:
                attribute = field.get_attribute(instance)
            except SkipField:
                continue
            check_for_none = attribute.pk if isinstance(attribute, PKOnlyObject) else attribute
            ret[field.field_name] = (
                None if check_for_none is None else field.to_representation(attribute)
            )
        return ret


# ---------------------------------------------------------------- strict request bodies


class StrictFieldsMixin(_SerializerBase):
    """Request bodies as the schema says, no more and no less (docs/api.md, "Strict
    requests"). Every serializer of the API stands on it (StrictSerializer,
    StrictModelSerializer; tests/foundation/test_strict_requests.py checks that none
    is left out), nested ones included, so each endpoint gets it without a line of
    its own:

    - a field the serializer does not know is refused: `"<name>": ["Unknown field."]`;
    - a value of the wrong JSON type is refused rather than coerced: a number for a
      string, a string for a number or a boolean, a string for a list
      (`json_type_problem`); form bodies (multipart) carry only strings and are
      checked for unknown fields alone;
    - read-only fields are accepted, so a client may send back an object it read:
      unchanged they are ignored, changed (on an update, where the current value is
      known) they are refused: "Read-only field.". `echo_fields` names read-only
      fields of the resource that an input-only serializer accepts and ignores (an
      update wrapped in `{"webhook": {...}}` that carries the webhook's id).
    """

    echo_fields: tuple[str, ...] = ()

    def to_internal_value(self, data):
        problems = self.strict_problems(data) if isinstance(data, Mapping) else {}
        try:
            value = super().to_internal_value(data)
        except ValidationError as exc:
            if not problems:
                raise
            detail = exc.detail if isinstance(exc.detail, dict) else {NON_FIELD: exc.detail}
            raise ValidationError({**detail, **problems}) from None
        if problems:
            raise ValidationError(problems)
        return value

    def strict_problems(self, data: Mapping) -> dict[str, list[str]]:
        fields = self.fields
        typed = not isinstance(data, QueryDict)  # JSON; a form's values are all strings
        problems: dict[str, list[str]] = {}
        for name, value in data.items():
            field = fields.get(name)
            if field is None:
                if name not in self.echo_fields:
                    problems[str(name)] = [UNKNOWN_FIELD]
                continue
            if field.read_only:
                if self._read_only_changed(field, value):
                    problems[name] = [READ_ONLY_FIELD]
                continue
            problem = json_type_problem(field, value) if typed else None
            if problem:
                problems[name] = [problem]
        return problems

    def _read_only_changed(self, field, value) -> bool:
        instance = getattr(self, "instance", None)
        if instance is None or getattr(self, "parent", None) is not None:
            return False  # a create, or nested: nothing to compare with
        try:
            current = field.get_attribute(instance)
            shown = None if current is None else field.to_representation(current)
        except Exception:  # an attribute the view fills itself: nothing to compare with
            return False
        return _as_json(shown) != _as_json(value)


def _as_json(value):
    return json.loads(json.dumps(value, cls=DjangoJSONEncoder, sort_keys=True))


NON_FIELD = api_settings.NON_FIELD_ERRORS_KEY
UNKNOWN_FIELD = "Unknown field."
READ_ONLY_FIELD = "Read-only field: it cannot be changed."


def json_type_problem(field: serializers.Field, value) -> str | None:
    """What is wrong with the JSON type of `value` for `field`, or None. Nested
    serializers check their own fields; list and dict children are checked here."""
    if value is None or isinstance(field, serializers.BaseSerializer):
        return None
    if isinstance(field, serializers.BooleanField):
        return None if isinstance(value, bool) else "Must be true or false (a JSON boolean)."
    if isinstance(field, serializers.IntegerField):
        ok = isinstance(value, int) and not isinstance(value, bool)
        return None if ok else "Must be an integer."
    if isinstance(field, serializers.FloatField | serializers.DecimalField):
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        return None if ok else "Must be a number."
    if isinstance(field, serializers.MultipleChoiceField):
        return None if isinstance(value, list) else "Must be a list."
    if isinstance(field, serializers.ChoiceField):
        if all(isinstance(choice, str) for choice in field.choices):
            return None if isinstance(value, str) else "Must be a string."
        return None
    if isinstance(
        field,
        serializers.CharField
        | serializers.UUIDField
        | serializers.DateTimeField
        | serializers.DateField
        | serializers.TimeField
        | serializers.PrimaryKeyRelatedField,
    ):
        return None if isinstance(value, str) else "Must be a string."
    if isinstance(field, serializers.ListField | serializers.ManyRelatedField):
        if not isinstance(value, list):
            return "Must be a list."
        child = getattr(field, "child", None) or getattr(field, "child_relation", None)
        for index, item in enumerate(value):
            problem = child is not None and json_type_problem(child, item)
            if problem:
                return f"Item {index}: {problem}"
        return None
    if isinstance(field, serializers.DictField):
        if not isinstance(value, dict):
            return "Must be an object."
        for key, item in value.items():
            problem = json_type_problem(field.child, item)
            if problem:
                return f"{key}: {problem}"
        return None
    return None


class StrictSerializer(StrictFieldsMixin, serializers.Serializer):
    """The base of the API's serializers (StrictFieldsMixin)."""


class RefusalSerializer(StrictSerializer):
    """The error a previewed request would answer (config.api.errors.refusal_json): its
    HTTP status and its envelope."""

    status = serializers.IntegerField()
    code = serializers.CharField()
    type = serializers.CharField()
    message = serializers.CharField()
    details = serializers.DictField(required=False)


class StrictModelSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    """The base of the API's model serializers (StrictFieldsMixin)."""


class QueryFiltersSerializer(StrictSerializer):
    """The filters of a list, read from its query string (`data=request.query_params`):
    only the parameters it declares are read and validated (a malformed one is
    validation_failed naming it); the others (`limit`, `starting_after`) belong to the
    pagination, which checks them itself."""

    def to_internal_value(self, data):
        declared = {name: data.get(name) for name in data if name in self.fields}
        return super().to_internal_value(declared)
