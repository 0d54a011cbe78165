"""Service status: /api/status and the liveness probe /api/util/ping (both open, also when
sign-in is required)."""

from typing import Any

from flask import Response, current_app
from marshmallow import Schema, fields, validate

from ..errors import StoreUnavailable
from ..security import auth_status, operators_only, public
from ..services import access
from ..services.startup import store_ready
from ..sql.roles import role_state
from ..telemetry import current_metrics
from .base import Blueprint

blp = Blueprint("status", __name__, url_prefix="/api", description="Service status")
metrics_blp = Blueprint("metrics", __name__, url_prefix="", description="Prometheus metrics")


class AuthStatus(Schema):
    required = fields.Boolean(required=True)
    signed_in = fields.Boolean(required=True)


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
    version = fields.String(required=True)
    auth = fields.Nested(AuthStatus, required=True)
    data_sources = fields.List(fields.Nested(DataSourceStatus), metadata={
        "description": "Only when sign-in is off or the caller is signed in"})


class PingOut(Schema):
    status = fields.String(required=True, validate=validate.OneOf(["ok"]))


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
            for s in _status_sources()]
    return status


def _status_sources() -> list[Any]:
    """The configured sources and those created at run time (their account check is stored
    with them), of those the caller may query (the others do not exist for it)."""
    registry = access.queryable_sources()
    found = (registry.get(name) for name in registry.names())
    return [s for s in found if s is not None]


@blp.route("/util/ping", methods=["GET"])
@blp.response(200, PingOut)
@public
def ping():
    """Liveness probe: open without sign-in, and it says nothing but that the process
    answers (no version, no counts, no store access)."""
    return {"status": "ok"}


class ReadinessOut(Schema):
    status = fields.String(metadata={"example": "ok"})
    store = fields.String(metadata={"example": "ok"})


@blp.route("/util/readiness", methods=["GET"])
@blp.response(200, ReadinessOut)
@blp.problems(403)
@operators_only
def readiness():
    """Readiness probe: the metadata store answers (503 when it does not)."""
    if not store_ready():
        raise StoreUnavailable("The metadata store does not answer")
    return {"status": "ok", "store": "ok"}


@metrics_blp.route("/metrics", methods=["GET"])
@metrics_blp.response(200, {"type": "string"}, content_type="text/plain")
@metrics_blp.problems(403)
@operators_only
def get_metrics():
    """Prometheus metrics of every worker (text exposition format)."""
    body, content_type = current_metrics().render()
    return Response(body, content_type=content_type)
