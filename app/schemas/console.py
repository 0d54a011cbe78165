"""The console's routes: schema for autocomplete, history, saved queries."""

from marshmallow import Schema, fields, validate

from .common import InputSchema, Name, Timestamp, ViewSchema

_STATEMENT = validate.Length(min=1, max=100_000)


# The longest search text: the request line holding it stays under gunicorn's
# limit_request_line (4094 bytes) even when every character is percent-encoded as four
# UTF-8 bytes (12 bytes each), so that a search of the documented length is answered by
# Quarry (400 beyond it), never refused by gunicorn (414).
SEARCH_MAX = 300


class HistoryArgs(InputSchema):
    q = fields.String(load_default=None, validate=validate.Length(max=SEARCH_MAX),
                      metadata={"description": "Text the statement or its error contains"})
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=1000))


class HistoryOut(ViewSchema):
    id = fields.Integer()
    statement = fields.String()
    database = fields.String(allow_none=True)
    ran_at = Timestamp()
    duration_ms = fields.Float(allow_none=True)
    row_count = fields.Integer(allow_none=True)
    outcome = fields.String()
    error_code = fields.Integer(allow_none=True)
    error_message = fields.String(allow_none=True)


class SavedQueryIn(InputSchema):
    name = Name(required=True)
    statement = fields.String(required=True, validate=_STATEMENT)
    database = fields.String(allow_none=True, load_default=None,
                             validate=validate.Length(max=63))


class SavedQueryOut(ViewSchema):
    name = fields.String()
    statement = fields.String()
    database = fields.String(allow_none=True)
    created_by = fields.String()
    created_at = Timestamp()
    updated_at = Timestamp()


class SchemaArgs(InputSchema):
    database = fields.String(load_default=None, validate=validate.Length(min=1, max=63),
                             metadata={"description": "Only this data source"})


class SchemaOut(Schema):
    data_sources = fields.List(fields.Dict(), metadata={
        "description": "name, dialect (of its SQL), engine (as the source was declared or "
                       "created: e.g. mariadb), tables (name, columns: name, type), error "
                       "if unread"})
    projects = fields.List(fields.Dict(), metadata={
        "description": "name, models (name, status), views (name, columns: name, type; "
                       "error when its columns could not be read); views only when no "
                       "database is asked for"})
