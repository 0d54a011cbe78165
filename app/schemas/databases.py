"""Databases (/api/databases): MindsDB's request and answer shapes."""

from marshmallow import INCLUDE, Schema, fields

from .common import DatabaseName, InputSchema, JsonObject, Masked, NonEmptyString


class DatabaseFields(InputSchema):
    name = DatabaseName(required=True)
    # Which engines Quarry serves is the service's to say (422 naming them).
    engine = NonEmptyString(required=True)
    parameters = JsonObject(load_default=dict)


class DatabaseIn(InputSchema):
    database = fields.Nested(DatabaseFields, required=True)
    check_connection = fields.Boolean(load_default=False)


class DatabaseChanges(InputSchema):
    # The name is the path's; a client that sends it back is not refused for it.
    name = DatabaseName(allow_none=True)
    engine = NonEmptyString(allow_none=True, load_default=None)
    parameters = JsonObject(allow_none=True, load_default=None)


class DatabasePut(InputSchema):
    database = fields.Nested(DatabaseChanges, required=True)
    check_connection = fields.Boolean(load_default=False)
    # MindsDB reads the body's "database" and "check_connection" and ignores the rest;
    # clients (and schemathesis' generator) send the engine beside "database" as well.
    engine = NonEmptyString(load_default=None, metadata={
        "description": "Ignored, as MindsDB ignores it: the engine is database.engine"})


class DatabaseStatusIn(Schema):
    """MindsDB's shape: the engine and the connection parameters side by side."""

    class Meta:
        unknown = INCLUDE  # every other member is a connection parameter

    engine = NonEmptyString(required=True)


class DatabaseGetArgs(InputSchema):
    check_connection = fields.Boolean(load_default=False, truthy={"true", "True"},
                                      falsy={"false", "False"})


class DatabaseDeleteArgs(InputSchema):
    cascade = fields.Boolean(load_default=False, truthy={"true", "True"},
                             falsy={"false", "False"})


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
    public = fields.Boolean(metadata={"description": "any signed-in user may query it"})
    privileged_role = fields.String(metadata={"enum": ["warn", "refuse"]})
    role_check = fields.String(metadata={
        "enum": ["passed", "privileged", "unknown", "not_applicable"],
        "description": "what the check of its account found (docs/sql.md, 'The account')"})
    warnings = fields.List(fields.String(), metadata={
        "description": "what its account may do beyond reading"})


class TableOut(Schema):
    name = fields.String()
    type = fields.String(metadata={"enum": ["data", "view"]})


class ConnectionStatusOut(Schema):
    status = fields.String(metadata={"enum": ["success", "connection_error"]})
    detail = fields.String()
