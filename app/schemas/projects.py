from marshmallow import Schema, fields

from .common import InputSchema, Name


class ProjectIn(InputSchema):
    name = Name(required=True)


class ProjectDeleteArgs(InputSchema):
    # true or false as JSON writes them (and as Python's requests sends True/False); not
    # marshmallow's other spellings (1, yes, on …), which the document's boolean does not name.
    cascade = fields.Boolean(load_default=False, truthy={"true", "True"},
                             falsy={"false", "False"})


class ProjectOut(Schema):
    name = fields.String(required=True)
    id = fields.Integer(required=True)
    created_at = fields.DateTime(required=True)
