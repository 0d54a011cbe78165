"""Service status: /api/status (always open, also when sign-in is required)."""

from flask import Response, current_app
from marshmallow import Schema, fields

from ..errors import StoreUnavailable
from ..security import auth_status, operators_only, public
from ..services.startup import store_ready
from ..telemetry import current_metrics
from .base import Blueprint

blp = Blueprint("status", __name__, url_prefix="/api", description="Service status")
metrics_blp = Blueprint("metrics", __name__, url_prefix="", description="Prometheus metrics")


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
def ping():
    """Liveness probe (as MindsDB serves it)."""
    return {"status": "ok"}


class ReadinessOut(Schema):
    status = fields.String(metadata={"example": "ok"})
    store = fields.String(metadata={"example": "ok"})


@blp.route("/util/readiness", methods=["GET"])
@blp.response(200, ReadinessOut)
@operators_only
def readiness():
    """Readiness probe: the metadata store answers (503 when it does not)."""
    if not store_ready():
        raise StoreUnavailable("The metadata store does not answer")
    return {"status": "ok", "store": "ok"}


@metrics_blp.route("/metrics", methods=["GET"])
@metrics_blp.response(200, {"type": "string"}, content_type="text/plain")
@operators_only
def get_metrics():
    """Prometheus metrics of every worker (text exposition format)."""
    body, content_type = current_metrics().render()
    return Response(body, content_type=content_type)
