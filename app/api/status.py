"""Service status: /api/status (always open, also when sign-in is required)."""

from marshmallow import Schema, fields, validate

from .. import __version__
from ..security import auth_status, public
from .base import Blueprint

blp = Blueprint("status", __name__, url_prefix="/api", description="Service status")


class AuthStatus(Schema):
    required = fields.Boolean(required=True)
    signed_in = fields.Boolean(required=True)


class StatusOut(Schema):
    version = fields.String(required=True)
    auth = fields.Nested(AuthStatus, required=True)


class PingOut(Schema):
    status = fields.String(required=True, validate=validate.OneOf(["ok"]))


@blp.route("/status", methods=["GET"])
@blp.response(200, StatusOut)
@public
def get_status():
    """Version, and whether sign-in is required and the caller signed in."""
    return {"version": __version__, "auth": auth_status()}


@blp.route("/util/ping", methods=["GET"])
@blp.response(200, PingOut)
def ping():
    """Liveness probe (as MindsDB serves it)."""
    return {"status": "ok"}
