"""Models: the CREATE MODEL request, predict and describe input, the model record."""

from typing import Any

from marshmallow import Schema, ValidationError, fields

from .common import InputSchema


class ModelIn(InputSchema):
    query = fields.String(required=True)


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
