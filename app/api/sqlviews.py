"""Views: /api/projects/<project>/views (MindsDB's namespaces/views.py)."""

from ..schemas.sqlviews import ViewIn, ViewOut, ViewPut
from ..services import sqlviews as service
from .base import Blueprint

blp = Blueprint("views", __name__, url_prefix="/api/projects/<name:project>/views",
                description="Views: a project's named SELECT statements, read as tables")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, ViewOut(many=True))
@blp.problems(404)
def list_views(project):
    """List a project's views."""
    return service.list_views(project)


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(ViewIn)
@blp.response(201, ViewOut)
@blp.problems(404, 409, 422)
def create_view(body, project):
    """Create a view."""
    return service.create_view(project, body["view"]["name"], body["view"]["query"])


@blp.route("/<name:name>", methods=["GET"])
@blp.response(200, ViewOut)
@blp.problems(404)
def get_view(project, name):
    """Get a view."""
    return service.get_view(project, name)


@blp.route("/<name:name>", methods=["PUT"])
@blp.arguments(ViewPut)
@blp.response(200, ViewOut)
@blp.problems(404, 422)
def update_view(body, project, name):
    """Replace a view's statement."""
    return service.update_view(project, name, body["view"]["query"])


@blp.route("/<name:name>", methods=["DELETE"])
@blp.response(204)
@blp.problems(404)
def delete_view(project, name):
    """Drop a view."""
    service.drop_view(project, name)
