"""Agent completions: MindsDB's request ({"messages": [{"question", "answer"}, …]}) and answer
({"message": {"role", "content"}}, which mindsdb_sdk's ``agent.completion()`` reads), plus the
statements the agent ran."""

from marshmallow import EXCLUDE, Schema, fields, validate

from .common import InputSchema


class MessageIn(Schema):
    class Meta:
        unknown = EXCLUDE  # clients send more (role, …): the question and answer are enough

    question = fields.String(allow_none=True, load_default=None)
    answer = fields.String(allow_none=True, load_default=None)


class CompletionIn(InputSchema):
    # The last one holds the question (a rule on the content: 422, in the service).
    messages = fields.List(fields.Nested(MessageIn), required=True,
                           validate=validate.Length(min=1))


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
