"""Databases: /api/databases (data sources created at run time, and the configured ones)."""

from flask import jsonify

from ..schemas.databases import (
    ConnectionStatusOut,
    DatabaseDeleteArgs,
    DatabaseGetArgs,
    DatabaseIn,
    DatabaseOut,
    DatabasePut,
    DatabaseStatusIn,
    TableOut,
)
from ..services import databases as service
from .base import Blueprint

blp = Blueprint("databases", __name__, url_prefix="/api/databases",
                description="Data sources: connected at run time or configured")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, DatabaseOut(many=True))
def list_databases():
    """List databases: system, projects, then data sources."""
    return service.list_databases()


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(DatabaseIn)
@blp.response(201, DatabaseOut)
@blp.alt_response(200, schema=ConnectionStatusOut,
                  description="check_connection was asked and the connection failed")
@blp.problems(403, 409, 422)
def create_database(body):
    """Connect a database (its password is stored encrypted)."""
    data = body["database"]
    try:
        return service.create_database(data["name"], data["engine"], data["parameters"],
                                       check=body["check_connection"])
    except service.ConnectionFailed as exc:
        # MindsDB answers a failed check with 200 and a status, not with an error.
        return jsonify({"status": "connection_error", "detail": exc.detail}), 200


@blp.route("/status", methods=["POST"])
@blp.arguments(DatabaseStatusIn)
@blp.response(200, ConnectionStatusOut)
@blp.problems(403, 422)
def check_database(body):
    """Test connection parameters without storing anything."""
    params = {k: v for k, v in body.items() if k != "engine"}
    if set(params) == {"parameters"} and isinstance(params["parameters"], dict):
        params = params["parameters"]
    return service.check_parameters(body["engine"], params)


@blp.route("/<database:name>", methods=["GET"])
@blp.arguments(DatabaseGetArgs, location="query")
@blp.response(200, DatabaseOut)
@blp.problems(404)
def get_database(args, name):
    """Get one database (?check_connection=true: and whether it can be reached)."""
    return service.get_database(name, check=args["check_connection"])


@blp.route("/<database:name>", methods=["PUT"])
@blp.arguments(DatabasePut)
@blp.response(200, DatabaseOut)
@blp.alt_response(201, schema=DatabaseOut, description="There was none: it was created")
@blp.alt_response(200, schema=ConnectionStatusOut, success=True,
                  description="check_connection was asked and the connection failed")
@blp.problems(403, 409, 422)
def update_database(body, name):
    """Change a database's parameters (merged; null removes one), or create it."""
    data = body["database"]
    try:
        view, created = service.update_database(name, data["engine"], data["parameters"],
                                                check=body["check_connection"])
    except service.ConnectionFailed as exc:
        return jsonify({"status": "connection_error", "detail": exc.detail}), 200
    return view, 201 if created else 200


@blp.route("/<database:name>", methods=["DELETE"])
@blp.arguments(DatabaseDeleteArgs, location="query")
@blp.response(204)
@blp.problems(403, 404, 409, 422)
def delete_database(args, name):
    """Drop a database (refused while models or skills use it, unless cascade=true)."""
    service.delete_database(name, cascade=args["cascade"])


@blp.route("/<database:name>/tables", methods=["GET"])
@blp.response(200, TableOut(many=True))
@blp.problems(403, 404, 409)
def list_tables(name):
    """List the tables and views of a data source."""
    return service.list_tables(name)
