"""Serializers for responses on hot paths.

DRF deep-copies a serializer's declared fields and binds the copies every time a
serializer is instantiated: for a short list response that copying costs more than
the query behind it. `RepresentationMixin` reuses the bound fields of one instance
per class instead. It is for serializers that only represent objects and whose
fields need nothing from `context` (no request-dependent URLs, no per-request
choices): once bound, such fields keep no state of their own between objects.
"""

from typing import TYPE_CHECKING

from rest_framework.fields import SkipField
from rest_framework.relations import PKOnlyObject

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
