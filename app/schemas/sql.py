"""Request schema of POST /api/sql/query (the answer is encoded by app.sql.encode)."""

from typing import Any

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validate

from .common import StrictFloat


class SqlContext(Schema):
    """Unknown keys inside context are ignored, as MindsDB does (clients send show_secrets)."""

    class Meta:
        unknown = EXCLUDE

    db = fields.String(allow_none=True, load_default=None)


class ParamValue(fields.Field):
    """A bind value: string, number, boolean or null (never spliced into SQL text).

    Loaded as it came (an integer stays an integer), so not as OneOf of marshmallow fields.
    """

    def __init__(self) -> None:
        super().__init__(allow_none=True, metadata={"oneOf": [
            {"type": "string"}, {"type": "number"}, {"type": "boolean"}]})

    def _deserialize(self, value: Any, attr, data, **kwargs) -> Any:
        if isinstance(value, str | int | float | bool):
            return value
        raise ValidationError("A parameter value is a string, number, boolean or null.")


class SqlQueryIn(Schema):
    """Unknown top-level keys are ignored too: MindsDB clients may send more than these."""

    class Meta:
        unknown = EXCLUDE

    query = fields.String(required=True, validate=validate.Length(min=1),
                          metadata={"example": "SELECT * FROM demo.iris LIMIT 3"})
    context = fields.Nested(SqlContext, allow_none=True, load_default=dict)
    params = fields.Dict(keys=fields.String(), values=ParamValue(),
                         allow_none=True, load_default=None)
    timeout_s = StrictFloat(allow_none=True, load_default=None,
                            validate=validate.Range(min=0, min_inclusive=False),
                            metadata={"description": "Lower this statement's time limit",
                                      "exclusiveMinimum": True})
    response_format = fields.String(
        allow_none=True, load_default=None,
        validate=validate.OneOf(["json", "jsonlines", "sse", "csv", "arrow"]),
        metadata={"description": "json (default: one answer); jsonlines or sse (MindsDB's "
                                 "streams), csv, arrow: streamed answers. The Accept header "
                                 "may choose one too"})


class SqlContextOut(Schema):
    db = fields.String(required=True)


class SqlResultOut(Schema):
    """The answer (documentation only: encoded by app.sql.encode for speed and exactness).

    type table has column_names, data and perhaps truncated; ok has empty column_names;
    error has error_code and error_message.
    """

    type = fields.String(required=True, validate=validate.OneOf(("table", "ok", "error")))
    column_names = fields.List(fields.String(), required=True)
    data = fields.List(fields.List(fields.Raw()))
    context = fields.Nested(SqlContextOut, required=True)
    truncated = fields.Boolean()
    query_id = fields.String(metadata={"description": "The statement's id (X-Query-Id)"})
    error_code = fields.Integer()
    error_message = fields.String()


class RunningLegOut(Schema):
    source = fields.String(metadata={"description": "the data source the leg reads"})
    sql = fields.String(metadata={"description": "the query sent to it (without the keys "
                                                 "of a dynamic filter)"})
    state = fields.String(metadata={"description": "waiting (its turn, or the keys of a "
                                                   "smaller leg), running or done"})
    rows = fields.Integer(metadata={"description": "rows it has delivered so far"})
    filters = fields.List(fields.String(), metadata={
        "description": "dynamic filters added at run time (key IN the keys of another leg)"})


class RunningQueryOut(Schema):
    """A statement running now, in any worker (GET /api/sql/queries)."""

    query_id = fields.String()
    user = fields.String(allow_none=True)
    source = fields.String(metadata={"description": "the data source it runs on"})
    statement = fields.String(metadata={"description": "the statement as it runs"})
    response_format = fields.String()
    started_at = fields.DateTime()
    rows_sent = fields.Integer(metadata={"description": "rows sent so far"})
    cancel_requested = fields.Boolean()
    legs = fields.List(fields.Nested(RunningLegOut), metadata={
        "description": "a statement over several data sources: its legs, as any worker of "
                       "any instance on the store sees them"})


class CancelledQueryOut(Schema):
    query_id = fields.String()
    cancel_requested = fields.Boolean()
