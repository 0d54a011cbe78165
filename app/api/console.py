"""The console's routes: /api/console/schema, /history, and a project's saved queries."""

from ..mindsdb.dispatch import console_schema
from ..schemas.console import (
    HistoryArgs,
    HistoryOut,
    SavedQueryIn,
    SavedQueryOut,
    SchemaArgs,
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
@blp.arguments(SchemaArgs, location="query")
@blp.response(200, SchemaOut)
@blp.problems(404)
def get_schema(args):
    """Data sources with tables and columns, projects with models and views (the console's
    tree and completion); with ``database``, that data source alone."""
    return console_schema(args["database"])


@blp.route("/history", methods=["GET"])
@blp.arguments(HistoryArgs, location="query")
@blp.response(200, HistoryOut(many=True))
def list_history(args):
    """The caller's statements (every client's: the SQL route keeps them), newest first,
    optionally only those matching ``q``."""
    return service.list_history(args["q"], args["limit"])


@blp.route("/history", methods=["DELETE"])
@blp.response(204)
def clear_history():
    """Forget the caller's statements."""
    service.clear_history()


@blp.route("/projects/<name:project>/saved", methods=["GET"])
@blp.response(200, SavedQueryOut(many=True))
@blp.problems(404)
def list_saved_queries(project):
    """A project's saved queries, by name."""
    return service.list_saved(project)


@blp.route("/projects/<name:project>/saved", methods=["POST"])
@blp.arguments(SavedQueryIn)
@blp.response(201, SavedQueryOut)
@blp.problems(403, 404, 409)
def save_query(body, project):
    """Save a statement under a name (the same name again replaces it)."""
    return service.save_query(project, _user(), body)


@blp.route("/projects/<name:project>/saved/<name:name>", methods=["DELETE"])
@blp.response(204)
@blp.problems(403, 404)
def delete_saved_query(project, name):
    """Delete a saved query."""
    service.delete_saved(project, name)
