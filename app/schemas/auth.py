from marshmallow import EXCLUDE, Schema, fields, validate

from .common import InputSchema


class LoginIn(InputSchema):
    """POST /api/login. Extra fields are ignored: MindsDB clients may send more (e.g. email)."""

    class Meta:
        unknown = EXCLUDE

    username = fields.String(required=True, validate=validate.Length(min=1, max=255))
    # Capped so a huge body cannot make one sign-in expensive; scrypt itself takes any length.
    password = fields.String(required=True, validate=validate.Length(min=1, max=1024))


class TokenOut(Schema):
    token = fields.String(required=True)
