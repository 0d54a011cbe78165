"""Jobs (/api/projects/<p>/jobs, CREATE JOB): MindsDB's shapes."""

from marshmallow import Schema, fields, validate

from .common import InputSchema, Name

_TIME = {"description": "UTC: 'YYYY-MM-DD HH:MM:SS' (or ISO 8601)", "example":
         "2026-01-01 00:00:00"}


class JobFields(InputSchema):
    name = Name(required=True)
    query = fields.String(required=True, validate=validate.Length(min=1, max=100_000),
                          metadata={"description": "the statements, separated by ';'"})
    if_query = fields.String(allow_none=True, validate=validate.Length(max=100_000),
                             metadata={"description": "a SELECT: run only when it has rows"})
    start_at = fields.String(allow_none=True, validate=validate.Length(max=64),
                             metadata=_TIME)
    end_at = fields.String(allow_none=True, validate=validate.Length(max=64), metadata=_TIME)
    schedule_str = fields.String(allow_none=True, validate=validate.Length(max=64),
                                 metadata={"description": "every [n] minute|hour|day|week|"
                                           "month; none: the job runs once",
                                           "example": "every 2 hours"})


class JobIn(InputSchema):
    job = fields.Nested(JobFields, required=True)


class JobOut(Schema):
    name = fields.String()
    project = fields.String()
    query = fields.String()
    if_query = fields.String(allow_none=True)
    start_at = fields.DateTime()
    end_at = fields.DateTime(allow_none=True)
    next_run_at = fields.DateTime(allow_none=True,
                                  metadata={"description": "none: no slot left"})
    schedule_str = fields.String(allow_none=True)
    created_by = fields.String(allow_none=True)
    created_at = fields.DateTime()


class JobRunOut(Schema):
    name = fields.String()
    project = fields.String()
    slot_at = fields.DateTime(metadata={"description": "the slot this run is for"})
    start_at = fields.DateTime()
    end_at = fields.DateTime(allow_none=True)
    outcome = fields.String(metadata={"description": "queued, running, ok, skipped (IF had "
                                                     "no rows) or error"})
    duration_s = fields.Float(allow_none=True)
    error = fields.String(allow_none=True)
    query = fields.String()
