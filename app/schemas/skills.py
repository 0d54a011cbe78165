from marshmallow import fields, validate

from ..rules.names import MAX_ID
from .common import (
    InputSchema,
    JsonObject,
    Masked,
    Name,
    NonEmptyString,
    Ref,
    Timestamp,
    ViewSchema,
)


class SkillFields(InputSchema):
    name = Name(required=True)
    type = NonEmptyString(required=True)
    params = JsonObject(required=True)


class SkillIn(InputSchema):
    skill = fields.Nested(SkillFields, required=True)


class SkillChanges(InputSchema):
    # Every field may be sent as null (left as it was): clients send all of them. A PUT on a
    # name no skill has creates the skill: then type and params must be given (else 422).
    name = Name(allow_none=True)
    type = NonEmptyString(allow_none=True)
    params = JsonObject(allow_none=True)


class SkillPut(InputSchema):
    skill = fields.Nested(SkillChanges, required=True)


class SkillListArgs(InputSchema):
    agent_id = fields.Integer(validate=validate.Range(min=1, max=MAX_ID))
    agent = Ref()


class SkillOut(ViewSchema):
    """A skill view (``services/views.py``): plain values, so a list of 1 000 dumps fast."""

    id = fields.Integer(required=True)
    name = fields.String(required=True)
    project_id = fields.Integer(required=True)
    type = fields.String(required=True)
    params = Masked(required=True)
    agent_ids = fields.Raw(required=True,
                           metadata={"type": "array", "items": {"type": "integer"}})
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
