"""Views (/api/projects/<p>/views): MindsDB's shapes ({"view": {"name", "query"}})."""

from marshmallow import Schema, fields

from .common import InputSchema, Name, NonEmptyString


class ViewFields(InputSchema):
    name = Name(required=True)
    query = NonEmptyString(required=True)


class ViewIn(InputSchema):
    view = fields.Nested(ViewFields, required=True)


class ViewChanges(InputSchema):
    name = Name(allow_none=True)  # the path's; a client that sends it back is not refused
    query = NonEmptyString(required=True)


class ViewPut(InputSchema):
    view = fields.Nested(ViewChanges, required=True)


class ViewOut(Schema):
    name = fields.String()
    query = fields.String()
    database = fields.String(allow_none=True,
                             metadata={"description": "CREATE VIEW … FROM <database>"})
