"""Project members and the audit log."""

from marshmallow import Schema, fields, validate

from .common import InputSchema


class MemberIn(InputSchema):
    role = fields.String(required=True, validate=validate.OneOf(("owner", "editor", "viewer")))


class MemberOut(Schema):
    user = fields.String()
    role = fields.String()
    since = fields.DateTime()


class AuditArgs(InputSchema):
    user = fields.String(validate=validate.Length(min=1, max=63))
    since = fields.AwareDateTime(default_timezone=None)
    kind = fields.String(validate=validate.OneOf(("sql", "project", "model", "skill", "agent",
                                                  "database", "user", "token", "grant",
                                                  "file", "view")))
    after = fields.String(validate=validate.Length(min=1, max=64))
    limit = fields.Integer(load_default=100, validate=validate.Range(min=1, max=1000))


class AuditRecordOut(Schema):
    id = fields.Integer()
    at = fields.DateTime()
    user = fields.String(attribute="user_name", allow_none=True)
    kind = fields.String()
    action = fields.String()
    target = fields.String(allow_none=True)
    before = fields.Raw(allow_none=True)
    after = fields.Raw(allow_none=True)
    source = fields.String(allow_none=True)
    statement = fields.String(allow_none=True)
    row_count = fields.Integer(allow_none=True)
    duration_ms = fields.Float(allow_none=True)
    outcome = fields.String(allow_none=True)
    error_code = fields.String(allow_none=True)


class AuditPageOut(Schema):
    records = fields.List(fields.Nested(AuditRecordOut))
    next_cursor = fields.String(allow_none=True)
