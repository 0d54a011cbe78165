from typing import Any

from marshmallow import ValidationError, fields

from .common import InputSchema, Masked, Name, Timestamp, ViewSchema
from .skills import SkillOut


class SkillRefFields(InputSchema):
    name = Name(required=True)
    parameters = fields.Dict(keys=fields.String(), allow_none=True)


class SkillRef(fields.Field):
    """A skill given by name, or as {"name": …, "parameters": {…}}."""

    def _deserialize(self, value: Any, attr, data, **kwargs) -> Any:
        if isinstance(value, str):
            return Name().deserialize(value)
        if isinstance(value, dict):
            return SkillRefFields().load(value)
        raise ValidationError('A skill is a name or an object {"name", "parameters"}.')


def _skill_list() -> fields.List:
    return fields.List(SkillRef(), allow_none=True)


class AgentFields(InputSchema):
    name = Name(required=True)
    model_name = fields.String(allow_none=True)
    provider = fields.String(allow_none=True)
    skills = _skill_list()
    params = fields.Dict(keys=fields.String(), allow_none=True)
    model = fields.Dict(keys=fields.String(), allow_none=True)
    data = fields.Dict(keys=fields.String(), allow_none=True)
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

    id = fields.Integer()
    name = fields.String()
    project_id = fields.Integer()
    model_name = fields.String(allow_none=True)
    provider = fields.String(allow_none=True)
    params = Masked()
    skills = fields.List(fields.Nested(SkillOut))
    skills_extra_parameters = Masked()
    model = Masked()
    data = Masked()
    prompt_template = fields.String(allow_none=True)
    created_at = Timestamp()
    updated_at = Timestamp()
