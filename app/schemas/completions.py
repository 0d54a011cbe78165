"""Agent completions: MindsDB's request ({"messages": [{"question", "answer"}, …]}) and answer
({"message": {"role", "content"}}, which mindsdb_sdk's ``agent.completion()`` reads), plus the
statements the agent ran."""

from marshmallow import EXCLUDE, Schema, ValidationError, fields, validates

from .common import InputSchema


class MessageIn(Schema):
    class Meta:
        unknown = EXCLUDE  # clients send more (role, …): the question and answer are enough

    question = fields.String(allow_none=True, load_default=None)
    answer = fields.String(allow_none=True, load_default=None)


class CompletionIn(InputSchema):
    messages = fields.List(fields.Nested(MessageIn), required=True)

    @validates("messages")
    def _last_is_a_question(self, value, **_):
        if not value or not (value[-1].get("question") or "").strip():
            raise ValidationError("The last message must hold the question to answer.")


class StatementOut(Schema):
    tool = fields.String(required=True)
    query = fields.String()
    rows = fields.Integer()
    truncated = fields.Boolean()
    error = fields.String()


class MessageOut(Schema):
    role = fields.String(required=True)
    content = fields.String(required=True)
    statements = fields.List(fields.Nested(StatementOut), required=True)


class CompletionOut(Schema):
    message = fields.Nested(MessageOut, required=True)
