"""Service status: /api/status and the liveness probe /api/util/ping (both open, also when
sign-in is required)."""

from flask import current_app
from marshmallow import Schema, fields

from ..security import auth_status, public
from ..sql.roles import role_state
from ..sql.sources import current_sources
from .base import Blueprint

blp = Blueprint("status", __name__, url_prefix="/api", description="Service status")


class AuthStatus(Schema):
    required = fields.Boolean()
    signed_in = fields.Boolean()


class DataSourceStatus(Schema):
    name = fields.String()
    engine = fields.String()
    role_check = fields.String(metadata={
        "description": "passed (SELECT-only account), privileged (see warnings), unknown "
                       "(not reachable yet: checked on its first statement) or "
                       "not_applicable (SQLite)",
        "enum": ["passed", "privileged", "unknown", "not_applicable"]})
    warnings = fields.List(fields.String(), metadata={
        "description": "What the source's account may do beyond reading"})


class StatusOut(Schema):
    version = fields.String()
    auth = fields.Nested(AuthStatus)
    data_sources = fields.List(fields.Nested(DataSourceStatus), metadata={
        "description": "Only when sign-in is off or the caller is signed in"})


class PingOut(Schema):
    status = fields.String()


@blp.route("/status", methods=["GET"])
@blp.response(200, StatusOut)
@public
def get_status():
    """Version, whether sign-in is required and the caller signed in, and the data sources'
    account checks (for callers who may see them)."""
    auth = auth_status()
    status = {"version": current_app.config["API_VERSION"], "auth": auth}
    # Open to anyone: what a data source's account may do is for signed-in eyes only.
    if not auth["required"] or auth["signed_in"]:
        status["data_sources"] = [
            {"name": s.name, "engine": s.engine_name, "role_check": role_state(s),
             "warnings": list(s.role.warnings) if s.role is not None else []}
            for s in current_sources().sources()]
    return status


@blp.route("/util/ping", methods=["GET"])
@blp.response(200, PingOut)
@public
def ping():
    """Liveness probe: open without sign-in, and it says nothing but that the process
    answers (no version, no counts, no store access)."""
    return {"status": "ok"}
