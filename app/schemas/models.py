"""Models: the CREATE MODEL request, predict and describe input, the model record."""

from marshmallow import Schema, fields, validate

from ..services.models import ATTRIBUTES
from .common import InputSchema, JsonObject, OneOf

# The describe attributes, any letter case (the service lowers them), as one regular
# expression the OpenAPI document can state: ^(?:[Ii][Nn][Ff][Oo]|…)$.
ATTRIBUTE_REGEX = "^(?:" + "|".join(
    "".join(f"[{c.upper()}{c}]" for c in attribute) for attribute in ATTRIBUTES) + ")$"
# At least one character that is not white space (the same set in ECMA-262 and Python).
NOT_BLANK_REGEX = r"^[ \t\n\r\f\v]*[^ \t\n\r\f\v]"


class ModelIn(InputSchema):
    # Whether the text is a CREATE MODEL statement the service can train is decided by the
    # service (422 if not); the schema refuses what is no statement at all.
    query = fields.String(required=True, validate=validate.Regexp(
        NOT_BLANK_REGEX, error="A CREATE MODEL statement is required."), metadata={
        "example": "CREATE MODEL mindsdb.iris_model FROM demo (SELECT * FROM iris) "
                   "PREDICT species"})


class PredictIn(InputSchema):
    # One row object, or a list of row objects. Whether the values fit the model's columns
    # is the model's to say (422 naming the column).
    data = OneOf(JsonObject(), fields.List(JsonObject(), required=True), required=True,
                 message="Must be an object or a list of objects.", metadata={"example": [
                     {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4,
                      "petal_width": 0.2}]})
    # Accepted for MindsDB clients, which send it; no sklearn prediction option uses it.
    params = JsonObject(load_default=dict, allow_none=True)


class DescribeArgs(InputSchema):
    attribute = fields.String(
        load_default=None, allow_none=True,
        validate=validate.Regexp(ATTRIBUTE_REGEX,
                                 error="Unknown attribute '{input}'; accepted values: "
                                       + ", ".join(ATTRIBUTES) + "."))


class ModelOut(Schema):
    id = fields.Integer(required=True)
    name = fields.String(required=True)
    version = fields.Integer(required=True)
    active = fields.Boolean(required=True)
    status = fields.String(required=True, validate=validate.OneOf(
        ("generating", "training", "complete", "error")))
    predict = fields.String(required=True)
    accuracy = fields.Float(required=True, allow_none=True)
    error = fields.String(required=True, allow_none=True)
    engine = fields.String(required=True)
    data_source = fields.String(required=True)
    fetch_data_query = fields.String(required=True)
    training_options = JsonObject(required=True)
    # MindsDB's name for the same object; its clients read this one.
    problem_definition = fields.Function(lambda model: model.training_options, required=True,
                                         metadata={"type": "object"})
    created_at = fields.DateTime(required=True)
    updated_at = fields.DateTime(required=True, allow_none=True)
    training_time = fields.Float(required=True, allow_none=True)


class DescribeInfo(Schema):
    """describe (attribute info): the model as a whole."""

    accuracies = fields.Dict(keys=fields.String(), values=fields.Float(), required=True)
    column_importances = fields.Dict(keys=fields.String(), values=fields.Float(),
                                     required=True)
    inputs = fields.List(fields.String(), required=True)
    outputs = fields.List(fields.String(), required=True)
    model = fields.String(required=True)
    problem = fields.String(required=True)
    training_rows = fields.Integer(required=True)
    validation_rows = fields.Integer(required=True)
    ignored_columns = fields.Dict(keys=fields.String(), values=fields.String(), required=True)


class DescribeFeature(Schema):
    """describe (attribute features): one column."""

    column = fields.String(required=True)
    type = fields.String(required=True)
    encoder = fields.String(required=True, allow_none=True)
    role = fields.String(required=True, validate=validate.OneOf(("feature", "ignored",
                                                                 "target")))
    reason = fields.String()


class DescribeCandidate(Schema):
    """describe (attribute model): one candidate estimator tried."""

    name = fields.String(required=True)
    performance = fields.Float(required=True, allow_none=True)
    training_time = fields.Float(required=True, allow_none=True)
    selected = fields.Integer(required=True, validate=validate.OneOf((0, 1)))
    accuracy_functions = fields.List(fields.String(), required=True)
    error = fields.String(metadata={"description": "Why this candidate failed to train"})
