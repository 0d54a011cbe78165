from marshmallow import Schema, fields

from .common import InputSchema, Name


class ProjectIn(InputSchema):
    name = Name(required=True)


class ProjectDeleteArgs(InputSchema):
    cascade = fields.Boolean(load_default=False)


class ProjectOut(Schema):
    name = fields.String()
    id = fields.Integer()
    created_at = fields.DateTime()
