"""Service status: /api/status and the liveness probe /api/util/ping (both open, also when
sign-in is required)."""

from flask import current_app
from marshmallow import Schema, fields

from ..security import auth_status, public
from .base import Blueprint

blp = Blueprint("status", __name__, url_prefix="/api", description="Service status")


class AuthStatus(Schema):
    required = fields.Boolean()
    signed_in = fields.Boolean()


class StatusOut(Schema):
    version = fields.String()
    auth = fields.Nested(AuthStatus)


class PingOut(Schema):
    status = fields.String()


@blp.route("/status", methods=["GET"])
@blp.response(200, StatusOut)
@public
def get_status():
    """Version, and whether sign-in is required and the caller signed in."""
    return {"version": current_app.config["API_VERSION"], "auth": auth_status()}


@blp.route("/util/ping", methods=["GET"])
@blp.response(200, PingOut)
@public
def ping():
    """Liveness probe: open without sign-in, and it says nothing but that the process
    answers (no version, no counts, no store access)."""
    return {"status": "ok"}
