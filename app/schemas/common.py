"""Fields and bases shared by the resource schemas."""

from typing import Any

from marshmallow import INCLUDE, Schema, ValidationError, fields, validate

from ..errors import shown
from ..rules.names import NAME_PATTERN, name_error
from ..rules.secrets import mask

# The naming rule as the OpenAPI document states it (ECMA-262 regular expressions, as JSON
# Schema has them; NAME_PATTERN uses no syntax on which they and Python's differ).
NAME_REGEX = f"^{NAME_PATTERN.pattern}$"
# A path's reference to a skill or an agent: its name, or its ID (all digits).
REF_REGEX = f"^(?:[0-9]+|{NAME_PATTERN.pattern})$"
# A path's reference to a model: its name, or one version of it as name.version.
MODEL_REF_REGEX = f"^{NAME_PATTERN.pattern}(?:\\.[0-9]+)?$"
# A database's name (data source or project, one name space): the naming rule, not starting
# with '-' either (it would read as an option in SQL tools).
DATABASE_NAME_REGEX = "^[A-Za-z_][A-Za-z0-9_-]{0,62}$"


class InputSchema(Schema):
    """Input: unknown fields are refused (the default), so a typo is reported, not ignored."""


class Name(fields.String):
    """An object name: the one naming rule, checked where every request enters."""

    def __init__(self, **kwargs: Any) -> None:
        # The rule in the OpenAPI document too, so that generated clients and fuzzers know it.
        kwargs.setdefault("metadata", {"pattern": NAME_REGEX, "minLength": 1, "maxLength": 63})
        super().__init__(**kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        message = name_error(text)
        if message:
            raise ValidationError(message)
        return text


class DatabaseName(Name):
    """A data source's name: the naming rule, and no '-' first."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("metadata", {"pattern": DATABASE_NAME_REGEX, "minLength": 1,
                                       "maxLength": 63})
        super().__init__(**kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if text.startswith("-"):
            raise ValidationError(f"Invalid name {shown(text)!r}: a database name starts with a "
                                  "letter or '_'.")
        return text


class Ref(fields.String):
    """A reference to a skill or an agent: its name, or its ID (all digits)."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("metadata", {"pattern": REF_REGEX, "minLength": 1, "maxLength": 63})
        super().__init__(**kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        text = super()._deserialize(value, attr, data, **kwargs)
        if not (text.isascii() and text.isdigit()) and name_error(text):
            raise ValidationError(f"Not a name or an ID: {shown(text)!r}.")
        return text


def NonEmptyString(**kwargs: Any) -> fields.String:  # noqa: N802 - a field factory
    return fields.String(validate=validate.Length(min=1, max=255), **kwargs)


def ShortString(**kwargs: Any) -> fields.String:  # noqa: N802 - a field factory
    """A string stored in a 255-character column (PostgreSQL refuses longer ones)."""
    return fields.String(validate=validate.Length(max=255), **kwargs)


class StrictFloat(fields.Float):
    """A JSON number only: marshmallow's Float also reads "1.5" (a string), which the
    document calls a wrong type."""

    def _deserialize(self, value: Any, attr, data, **kwargs) -> float | None:
        if isinstance(value, str):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


def JsonObject(**kwargs: Any) -> fields.Dict:  # noqa: N802 - a field factory
    """A JSON object of any values (params, model, data …)."""
    return fields.Dict(keys=fields.String(), **kwargs)


class OneOf(fields.Field):
    """A value of one of several shapes, each a field; documented as ``oneOf`` of them.

    The shapes must not overlap (a string and an object, say): the first that loads the
    value wins, and ``oneOf`` in the document says exactly one of them matches.
    """

    def __init__(self, *alternatives: fields.Field, message: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.alternatives = alternatives
        self.message = message

    def _deserialize(self, value: Any, attr, data, **kwargs) -> Any:
        for alternative in self.alternatives:
            try:
                return alternative.deserialize(value)
            except ValidationError:
                continue
        raise ValidationError(self.message)


class JsonObjects(OneOf):
    """One JSON object, or a list of them (rows to predict from); documented as ``oneOf``
    the two, like ``OneOf``.

    A body that is already of that shape is taken in one pass over the list: marshmallow's
    ``List(Dict)`` loads each row through its own field and each key through another, which
    was most of a 10 000-row predict (~100 ms of ~180). JSON object keys are always strings,
    so checking that each row is an object is the whole check. Anything else goes through the
    fields, so a bad body is refused with the same messages as before.
    """

    def __init__(self, *, message: str, **kwargs: Any) -> None:
        super().__init__(JsonObject(), fields.List(JsonObject(), required=True),
                         message=message, **kwargs)

    def _deserialize(self, value: Any, attr, data, **kwargs) -> Any:
        if type(value) is list:
            if all(type(row) is dict for row in value):
                return value
        elif type(value) is dict:
            return value
        return super()._deserialize(value, attr, data, **kwargs)


class Masked(fields.Raw):
    """Output of a JSON object whose secret-looking keys are shown as ********."""

    def __init__(self, **kwargs: Any) -> None:
        kwargs.setdefault("metadata", {"type": "object", "additionalProperties": {}})
        super().__init__(**kwargs)

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


def Timestamp(**kwargs: Any) -> fields.Raw:  # noqa: N802 - a field factory
    """An ISO 8601 UTC timestamp, already formatted by the view that read it."""
    return fields.Raw(metadata={"type": "string", "format": "date-time"}, **kwargs)


class ProblemSchema(Schema):
    """The problem+json error envelope (documentation only)."""

    class Meta:
        unknown = INCLUDE  # some problems add members: contents, model_status, retry_after…

    title = fields.String(required=True)
    detail = fields.String(required=True)
    status = fields.Integer(required=True, validate=validate.Range(min=400, max=599))
    timestamp = fields.String(metadata={"format": "date-time"})
    # Per field, the messages about it: a list of strings, or (for a nested object) the
    # same shape again.
    errors = fields.Dict(keys=fields.String())
