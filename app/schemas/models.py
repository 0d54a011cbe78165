"""Models: the CREATE MODEL request and its USING options, predict and describe input, the
model record."""

from collections.abc import Callable
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from ..ml import PROBLEMS
from .common import InputSchema

ENGINES = ("sklearn", "lightwood")  # lightwood: MindsDB's default, trained here by sklearn


class ModelIn(InputSchema):
    query = fields.String(required=True)


class _Word(fields.Field):
    """One of a few words, in any case (``USING engine = 'SKLearn'``)."""

    def __init__(self, choices: tuple[str, ...], message: Callable[[Any], str],
                 **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.choices = choices
        self.message = message

    def _deserialize(self, value: Any, attr, data, **kwargs) -> str:
        word = value.lower() if isinstance(value, str) else None
        if word not in self.choices:
            raise ValidationError(self.message(value))
        return word


class _Flag(fields.Field):
    """true or false: a boolean, the word in any case, or 0 / 1 (as SQL writes them)."""

    def _deserialize(self, value: Any, attr, data, **kwargs) -> bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        if isinstance(value, int) and value in (0, 1):
            return bool(value)
        raise ValidationError("Must be true or false.")


class _Number(fields.Float):
    """A number written as one: SQL's '0.3' is text, not a number."""

    def _deserialize(self, value: Any, attr, data, **kwargs) -> float:
        if isinstance(value, str):
            raise self.make_error("invalid")
        return super()._deserialize(value, attr, data, **kwargs)


_FRACTION = "Must be a number from 0.05 to 0.5."
_POSITIVE = "Must be a positive integer."


class TrainingOptions(InputSchema):
    """The USING options of CREATE MODEL, from REST and SQL alike (keys in lower case)."""

    error_messages = {"unknown": "Unknown key; accepted keys: engine, join_learn_process, "
                                 "problem, validation_fraction, max_rows, active."}

    engine = _Word(ENGINES, lambda value: f"Unknown engine {value!r}; engines: sklearn "
                                          "(lightwood is accepted as an alias of sklearn).")
    join_learn_process = _Flag()
    problem = _Word(PROBLEMS, lambda value: f"Must be one of {', '.join(PROBLEMS)}.")
    validation_fraction = _Number(validate=validate.Range(0.05, 0.5, error=_FRACTION),
                                  error_messages={"invalid": _FRACTION, "special": _FRACTION})
    max_rows = fields.Integer(strict=True, validate=validate.Range(min=1, error=_POSITIVE),
                              error_messages={"invalid": _POSITIVE})
    # RETRAIN / FINETUNE … USING active = false: train the version but keep the old one active.
    active = _Flag()


class RetrainIn(InputSchema):
    """POST …/models/<m>/retrain and …/finetune: both fields optional, as in MindsDB."""

    query = fields.String(load_default=None, allow_none=True)
    data_source = fields.String(load_default=None, allow_none=True)
    using = fields.Dict(keys=fields.String(), load_default=dict, allow_none=True)


class ActivateIn(InputSchema):
    """PUT …/models/<m>: which version answers predictions made without a version."""

    active_version = fields.Integer(required=True, strict=True,
                                    validate=validate.Range(min=1, error=_POSITIVE))


class PredictRows(fields.Raw):
    """One row object, or a list of row objects."""

    def _deserialize(self, value: Any, attr, data, **kwargs) -> list[dict[str, Any]]:
        rows = [value] if isinstance(value, dict) else value
        if not isinstance(rows, list):
            raise ValidationError("Must be an object or a list of objects.")
        bad = [i for i, row in enumerate(rows) if not isinstance(row, dict)]
        if bad:
            raise ValidationError(f"Every row must be an object; row {bad[0]} is not.")
        return rows


class PredictIn(InputSchema):
    data = PredictRows(required=True)
    # Accepted for MindsDB clients, which send it; no sklearn prediction option uses it.
    params = fields.Dict(keys=fields.String(), load_default=dict, allow_none=True)


class DescribeArgs(InputSchema):
    attribute = fields.String(load_default=None, allow_none=True)


class ModelOut(Schema):
    id = fields.Integer()
    name = fields.String()
    version = fields.Integer()
    active = fields.Boolean()
    status = fields.String()
    predict = fields.String()
    accuracy = fields.Float(allow_none=True)
    error = fields.String(allow_none=True)
    engine = fields.String()
    data_source = fields.String()
    fetch_data_query = fields.String()
    training_options = fields.Dict()
    # MindsDB's name for the same object; its clients read this one.
    problem_definition = fields.Function(lambda model: model.training_options)
    created_at = fields.DateTime()
    updated_at = fields.DateTime()
    training_time = fields.Float(allow_none=True)
    progress = fields.Dict(allow_none=True)
    attempts = fields.Integer()
    base_version = fields.Integer(allow_none=True)
