from marshmallow import fields

from .common import InputSchema, Masked, Name, NonEmptyString, Timestamp, ViewSchema


class SkillFields(InputSchema):
    name = Name(required=True)
    type = NonEmptyString(required=True)
    params = fields.Dict(keys=fields.String(), required=True)


class SkillIn(InputSchema):
    skill = fields.Nested(SkillFields, required=True)


class SkillChanges(InputSchema):
    # Every field may be sent as null (left as it was): clients send all of them.
    name = Name(allow_none=True)
    type = NonEmptyString(allow_none=True)
    params = fields.Dict(keys=fields.String(), allow_none=True)


class SkillPut(InputSchema):
    skill = fields.Nested(SkillChanges, required=True)


class SkillListArgs(InputSchema):
    agent_id = fields.Integer(strict=False)
    agent = fields.String()


class SkillOut(ViewSchema):
    """A skill view (``services/views.py``): plain values, so a list of 1 000 dumps fast."""

    id = fields.Integer()
    name = fields.String()
    project_id = fields.Integer()
    type = fields.String()
    params = Masked()
    agent_ids = fields.Raw(metadata={"type": "array", "items": {"type": "integer"}})
    created_at = Timestamp()
    updated_at = Timestamp()
