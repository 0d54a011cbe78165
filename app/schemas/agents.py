from marshmallow import fields

from .common import (
    InputSchema,
    JsonObject,
    Masked,
    Name,
    OneOf,
    ShortString,
    Timestamp,
    ViewSchema,
)
from .skills import SkillOut


class SkillRefFields(InputSchema):
    name = Name(required=True)
    parameters = JsonObject(allow_none=True)


def SkillRef() -> OneOf:  # noqa: N802 - a field factory
    """A skill given by name, or as {"name": …, "parameters": {…}}."""
    return OneOf(Name(required=True), fields.Nested(SkillRefFields, required=True),
                 message='A skill is a name or an object {"name", "parameters"}.')


def _skill_list() -> fields.List:
    return fields.List(SkillRef(), allow_none=True)


class AgentFields(InputSchema):
    name = Name(required=True)
    model_name = ShortString(allow_none=True)
    provider = ShortString(allow_none=True)
    skills = _skill_list()
    params = JsonObject(allow_none=True)
    model = JsonObject(allow_none=True)
    data = JsonObject(allow_none=True)
    prompt_template = fields.String(allow_none=True)


class AgentIn(InputSchema):
    agent = fields.Nested(AgentFields, required=True)


class AgentChanges(AgentFields):
    name = Name(allow_none=True)
    skills_to_add = _skill_list()
    skills_to_remove = _skill_list()


class AgentPut(InputSchema):
    agent = fields.Nested(AgentChanges, required=True)


class AgentOut(ViewSchema):
    """An agent view (``services/views.py``) with its skills."""

    id = fields.Integer(required=True)
    name = fields.String(required=True)
    project_id = fields.Integer(required=True)
    model_name = fields.String(required=True, allow_none=True)
    provider = fields.String(required=True, allow_none=True)
    params = Masked(required=True)
    skills = fields.List(fields.Nested(SkillOut), required=True)
    # Per skill name, the parameters the agent gives it ({} when none).
    skills_extra_parameters = Masked(required=True, metadata={
        "type": "object", "additionalProperties": {"type": "object"}})
    model = Masked(required=True, allow_none=True)
    data = Masked(required=True, allow_none=True)
    prompt_template = fields.String(required=True, allow_none=True)
    created_at = Timestamp(required=True)
    updated_at = Timestamp(required=True)
