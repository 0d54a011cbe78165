"""The console's routes: /api/console/schema, /history, and a project's saved queries."""

from ..schemas.console import (
    HistoryArgs,
    HistoryIn,
    HistoryOut,
    SavedQueryIn,
    SavedQueryOut,
    SchemaOut,
)
from ..security import current_principal
from ..services import console as service
from .base import Blueprint

blp = Blueprint("console_api", __name__, url_prefix="/api/console",
                description="What the web console keeps: statement history, saved queries")


def _user() -> str | None:
    principal = current_principal()
    return principal.user_name if principal is not None else None


@blp.route("/schema", methods=["GET"])
@blp.response(200, SchemaOut)
def get_schema():
    """Data sources with tables and columns, projects with models (for autocomplete)."""
    return service.schema()


@blp.route("/history", methods=["GET"])
@blp.arguments(HistoryArgs, location="query")
@blp.response(200, HistoryOut(many=True))
def list_history(args):
    """The caller's statements, newest first, optionally only those matching ``q``."""
    return service.list_history(_user(), args["q"], args["limit"])


@blp.route("/history", methods=["POST"])
@blp.arguments(HistoryIn)
@blp.response(201, HistoryOut)
def record_statement(body):
    """Keep a statement the caller ran, with its outcome."""
    return service.record_statement(_user(), body)


@blp.route("/history", methods=["DELETE"])
@blp.response(204)
def clear_history():
    """Forget the caller's statements."""
    service.clear_history(_user())


@blp.route("/projects/<string:project>/saved", methods=["GET"])
@blp.response(200, SavedQueryOut(many=True))
def list_saved_queries(project):
    """A project's saved queries, by name."""
    return service.list_saved(project)


@blp.route("/projects/<string:project>/saved", methods=["POST"])
@blp.arguments(SavedQueryIn)
@blp.response(201, SavedQueryOut)
def save_query(body, project):
    """Save a statement under a name (the same name again replaces it)."""
    return service.save_query(project, _user(), body)


@blp.route("/projects/<string:project>/saved/<string:name>", methods=["DELETE"])
@blp.response(204)
def delete_saved_query(project, name):
    """Delete a saved query."""
    service.delete_saved(project, name)
