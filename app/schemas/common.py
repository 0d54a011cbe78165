"""Fields and bases shared by the resource schemas."""

from typing import Any

from marshmallow import INCLUDE, Schema, ValidationError, fields, validate

from ..rules.names import NAME_PATTERN, name_error
from ..rules.secrets import mask


class InputSchema(Schema):
    """Input: unknown fields are refused (the default), so a typo is reported, not ignored."""


class Name(fields.String):
    """An object name: the one naming rule, checked where every request enters."""

    def __init__(self, **kwargs: Any) -> None:
        # The rule in the OpenAPI document too, so that generated clients and fuzzers know it.
        kwargs.setdefault("metadata", {"pattern": f"^{NAME_PATTERN.pattern}$"})
        super().__init__(**kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        message = name_error(text)
        if message:
            raise ValidationError(message)
        return text


def NonEmptyString(**kwargs: Any) -> fields.String:  # noqa: N802 - a field factory
    return fields.String(validate=validate.Length(min=1, max=255), **kwargs)


class Masked(fields.Raw):
    """Output of a JSON object whose secret-looking keys are shown as ********."""

    def _serialize(self, value: Any, attr, obj, **kwargs) -> Any:
        return mask(value)


class ViewSchema(Schema):
    """Output schema for the plain-dict views of ``services/views.py``.

    The views already hold JSON-ready values of the declared types, so dumping them needs
    no per-field conversion: this dump copies each declared key, masks secrets and dumps
    nested views, about five times faster than marshmallow's general path (listing 1 000
    skills spent most of its time there). The fields still declare the shape, and they
    generate the OpenAPI document.
    """

    _PLAIN = (fields.Integer, fields.String, fields.Boolean, fields.Float)

    def dump(self, obj: Any, *, many: bool | None = None) -> Any:
        many = self.many if many is None else many
        plan = self._plan()
        if many:
            return [{key: (value(item.get(key)) if value else item.get(key))
                     for key, value in plan} for item in obj]
        return {key: (value(obj.get(key)) if value else obj.get(key)) for key, value in plan}

    def _plan(self) -> list[tuple[str, Any]]:
        plan = []
        for name, field in self.dump_fields.items():
            key = field.data_key or name
            if isinstance(field, Masked):
                plan.append((key, mask))
            elif isinstance(field, fields.List) and isinstance(field.inner, fields.Nested):
                nested = field.inner.schema
                plan.append((key, lambda v, s=nested: None if v is None else s.dump(v, many=True)))
            elif type(field) is fields.Raw or isinstance(field, self._PLAIN):
                plan.append((key, None))
            else:
                raise TypeError(f"{type(self).__name__}.{name}: a view field must be plain")
        return plan


def Timestamp() -> fields.Raw:  # noqa: N802 - a field factory
    """An ISO 8601 UTC timestamp, already formatted by the view that read it."""
    return fields.Raw(metadata={"type": "string", "format": "date-time"})


class ProblemSchema(Schema):
    """The problem+json error envelope (documentation only)."""

    class Meta:
        unknown = INCLUDE  # some problems add members: contents, model_status, retry_after…

    title = fields.String()
    detail = fields.String()
    status = fields.Integer()
    timestamp = fields.String()
    errors = fields.Dict()
