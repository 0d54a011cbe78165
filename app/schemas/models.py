"""Models: the CREATE MODEL request and its USING options, predict and describe input, the
model record."""

from collections.abc import Callable
from typing import Any

from marshmallow import Schema, ValidationError, fields, validate

from ..errors import shown
from ..ml import PROBLEMS
from ..services.models import ATTRIBUTES
from .common import InputSchema, JsonObject, JsonObjects, StrictFloat

# The describe attributes, any letter case (the service lowers them), as one regular
# expression the OpenAPI document can state: ^(?:[Ii][Nn][Ff][Oo]|…)$.
ATTRIBUTE_REGEX = "^(?:" + "|".join(
    "".join(f"[{c.upper()}{c}]" for c in attribute) for attribute in ATTRIBUTES) + ")$"
# At least one character that is not white space (the same set in ECMA-262 and Python).
NOT_BLANK_REGEX = r"^[ \t\n\r\f\v]*[^ \t\n\r\f\v]"

ENGINES = ("sklearn", "lightwood")  # lightwood: MindsDB's default, trained here by sklearn


class ModelIn(InputSchema):
    # Whether the text is a CREATE MODEL statement the service can train is decided by the
    # service (422 if not); the schema refuses what is no statement at all.
    query = fields.String(required=True, validate=validate.Regexp(
        NOT_BLANK_REGEX, error="A CREATE MODEL statement is required."), metadata={
        "example": "CREATE MODEL mindsdb.iris_model FROM demo (SELECT * FROM iris) "
                   "PREDICT species"})


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


_FRACTION = "Must be a number from 0.05 to 0.5."
_POSITIVE = "Must be a positive integer."
_BUDGET = "Must be a number of seconds from 1 to 3600."


class TrainingOptions(InputSchema):
    """The USING options of CREATE MODEL, from REST and SQL alike (keys in lower case)."""

    error_messages = {"unknown": "Unknown key; accepted keys: engine, join_learn_process, "
                                 "problem, validation_fraction, max_rows, "
                                 "time_budget_s, active."}

    engine = _Word(ENGINES, lambda value: f"Unknown engine {shown(str(value))!r}; engines: sklearn "
                                          "(lightwood is accepted as an alias of sklearn).")
    join_learn_process = _Flag()
    problem = _Word(PROBLEMS, lambda value: f"Must be one of {', '.join(PROBLEMS)}.")
    validation_fraction = StrictFloat(validate=validate.Range(0.05, 0.5, error=_FRACTION),
                                      error_messages={"invalid": _FRACTION, "special": _FRACTION})
    max_rows = fields.Integer(strict=True, validate=validate.Range(min=1, error=_POSITIVE),
                              error_messages={"invalid": _POSITIVE})
    # Seconds the candidate search may take (default: scaled to the data, 5 to 40 s).
    time_budget_s = StrictFloat(validate=validate.Range(1, 3600, error=_BUDGET),
                                error_messages={"invalid": _BUDGET, "special": _BUDGET})
    # RETRAIN / FINETUNE … USING active = false: train the version but keep the old one active.
    active = _Flag()


class RetrainIn(InputSchema):
    """POST …/models/<m>/retrain and …/finetune: every field optional, as in MindsDB."""

    # The training query (default: the stored one). Whether it can train is the service's to
    # say (422), as for CREATE MODEL.
    query = fields.String(load_default=None, allow_none=True, metadata={
        "example": "SELECT * FROM iris"})
    data_source = fields.String(load_default=None, allow_none=True, metadata={
        "example": "demo"})
    using = JsonObject(load_default=dict, allow_none=True, metadata={
        "description": "Options merged over the stored ones (CREATE MODEL's USING keys, and "
                       "active)"})


class ActivateIn(InputSchema):
    """PUT …/models/<m>: which version answers predictions made without a version."""

    active_version = fields.Integer(required=True, strict=True,
                                    validate=validate.Range(min=1, max=2147483647,
                                                            error=_POSITIVE))


class PredictIn(InputSchema):
    # One row object, or a list of row objects. Whether the values fit the model's columns
    # is the model's to say (422 naming the column).
    data = JsonObjects(required=True, message="Must be an object or a list of objects.",
                       metadata={"example": [{"sepal_length": 5.1, "sepal_width": 3.5,
                                              "petal_length": 1.4, "petal_width": 0.2}]})
    # Accepted for MindsDB clients, which send it; no sklearn prediction option uses it.
    params = JsonObject(load_default=dict, allow_none=True)


def _known_attribute(value: str) -> None:
    if value.lower() not in ATTRIBUTES:
        raise ValidationError(f"Unknown attribute {shown(value)!r}; accepted values: "
                              + ", ".join(ATTRIBUTES) + ".")


class DescribeArgs(InputSchema):
    attribute = fields.String(
        load_default=None, allow_none=True,
        validate=_known_attribute, metadata={
            "pattern": ATTRIBUTE_REGEX, "maxLength": max(len(a) for a in ATTRIBUTES)})


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
    progress = JsonObject(required=True, allow_none=True, metadata={
        "description": "While training: the phase and rows read so far"})
    attempts = fields.Integer(required=True)
    base_version = fields.Integer(required=True, allow_none=True, metadata={
        "description": "The version a FINETUNE started from; null otherwise"})


class DescribeInfo(Schema):
    """describe (attribute info): the model as a whole (docs/models.md says what each is)."""

    accuracies = fields.Dict(keys=fields.String(), values=fields.Float(), required=True)
    column_importances = fields.Dict(keys=fields.String(), values=fields.Float(),
                                     required=True)
    inputs = fields.List(fields.String(), required=True)
    outputs = fields.List(fields.String(), required=True)
    model = fields.String(required=True)
    problem = fields.String(required=True, validate=validate.OneOf(("classification",
                                                                    "regression")))
    accuracy_std = fields.Dict(keys=fields.String(), values=fields.Float(), required=True)
    accuracy_se = fields.Dict(keys=fields.String(), values=fields.Float(allow_none=True),
                              metadata={"description": "Standard error of the "
                                        "cross-validated mean (null for one hold-out)"})
    accuracy_interval = fields.Dict(keys=fields.String(), values=fields.List(fields.Float()),
                                    required=True)
    folds = fields.Integer(required=True, metadata={
        "description": "Folds of one partition of the rows (1 for a hold-out)"})
    repeats = fields.Integer(metadata={
        "description": "Partitions the k-fold cross-validation ran on (1: not repeated)"})
    evaluation = JsonObject(required=True)
    final_model_rows = fields.Integer(required=True)
    final_model_note = fields.String(required=True)
    column_importance_std = fields.Dict(keys=fields.String(), values=fields.Float(),
                                        required=True)
    importances = JsonObject(required=True)
    time_budget_s = fields.Float(required=True)
    search_time_s = fields.Float(required=True)
    training_time_s = fields.Float(metadata={
        "description": "Wall-clock seconds of the whole training, next to time_budget_s"})
    search = JsonObject(metadata={
        "description": "Candidates that ran, were reduced, stopped or skipped (with why)"})
    ignored_columns = fields.Dict(keys=fields.String(), values=fields.String(), required=True)
    calibration = JsonObject(metadata={"description": "Classification only"})
    interval = JsonObject(metadata={"description": "Regression only"})
    rare_classes = JsonObject(metadata={"description": "Classes with fewer rows than folds"})
    confusion_matrix = JsonObject(metadata={
        "description": "Classification only: labels, matrix (rows actual, columns predicted)"})
    residuals = JsonObject(metadata={
        "description": "Regression only: the residual plot's points"})


class DescribeFeature(Schema):
    """describe (attribute features): one column."""

    column = fields.String(required=True)
    type = fields.String(required=True)
    encoder = fields.String(required=True, allow_none=True)
    role = fields.String(required=True, validate=validate.OneOf(("feature", "ignored",
                                                                 "target")))
    reason = fields.String()
    source_type = fields.String(allow_none=True, metadata={
        "description": "'text' when the source held text (a number, boolean or date was "
                       "read from it); for a classification target, the type of its values "
                       "(text, bool, int, float)"})
    values = fields.List(fields.Raw(), allow_none=True, metadata={
        "description": "Target of a classification: the values predictions answer, as "
                       "the training rows held them"})


class DescribeCandidate(Schema):
    """describe (attribute model): one candidate setting tried."""

    name = fields.String(required=True)
    performance = fields.Float(required=True, allow_none=True)
    performance_std = fields.Float(allow_none=True)
    performance_se = fields.Float(allow_none=True, metadata={
        "description": "Standard error of performance (null below two folds scored)"})
    training_time = fields.Float(required=True, allow_none=True)
    selected = fields.Integer(required=True, validate=validate.OneOf((0, 1)))
    accuracy_functions = fields.List(fields.String(), required=True)
    folds_scored = fields.Integer()
    folds = fields.Integer(metadata={"description": "Folds to score: folds × repeats"})
    params = JsonObject()
    stopped = fields.String(allow_none=True, metadata={
        "description": "Why it did not run every fold (halving, time budget); null if it did"})
    error = fields.String(allow_none=True, metadata={
        "description": "Why this candidate failed to train; null if it did not"})
    reduced = fields.String(allow_none=True, metadata={
        "description": "Why it ran fewer iterations or trees than its setting (the time "
                       "budget); null if it did not"})
