"""Databases (/api/databases): MindsDB's request and answer shapes."""

from marshmallow import INCLUDE, Schema, fields

from .common import InputSchema, Masked, Name, NonEmptyString


class DatabaseFields(InputSchema):
    name = Name(required=True)
    engine = NonEmptyString(required=True)
    parameters = fields.Dict(keys=fields.String(), load_default=dict)


class DatabaseIn(InputSchema):
    database = fields.Nested(DatabaseFields, required=True)
    check_connection = fields.Boolean(load_default=False)


class DatabaseChanges(InputSchema):
    # The name is the path's; a client that sends it back is not refused for it.
    name = Name(allow_none=True)
    engine = NonEmptyString(allow_none=True, load_default=None)
    parameters = fields.Dict(keys=fields.String(), allow_none=True, load_default=None)


class DatabasePut(InputSchema):
    database = fields.Nested(DatabaseChanges, required=True)
    check_connection = fields.Boolean(load_default=False)


class DatabaseStatusIn(Schema):
    """MindsDB's shape: the engine and the connection parameters side by side."""

    class Meta:
        unknown = INCLUDE  # every other member is a connection parameter

    engine = NonEmptyString(required=True)


class DatabaseGetArgs(InputSchema):
    check_connection = fields.Boolean(load_default=False)


class DatabaseDeleteArgs(InputSchema):
    cascade = fields.Boolean(load_default=False)


class DatabaseOut(Schema):
    """A database: a data source (configured or created at run time), a project or a system
    database; the members a kind does not have are left out."""

    id = fields.Integer(allow_none=True)
    name = fields.String()
    type = fields.String(metadata={"enum": ["data", "project", "system"]})
    engine = fields.String(allow_none=True)
    class_type = fields.String()
    permanent = fields.Boolean()
    configured = fields.Boolean()
    date_last_update = fields.String(allow_none=True)
    connection_data = Masked()
    visible = fields.Boolean()
    deletable = fields.Boolean()
    connection_status = fields.Dict(metadata={"description": "with ?check_connection=true: "
                                                             "{success, error_message}"})


class TableOut(Schema):
    name = fields.String()
    type = fields.String(metadata={"enum": ["data", "view"]})


class ConnectionStatusOut(Schema):
    status = fields.String(metadata={"enum": ["success", "connection_error"]})
    detail = fields.String()
