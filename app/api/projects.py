"""Projects: /api/projects."""

from ..schemas.projects import ProjectDeleteArgs, ProjectIn, ProjectOut
from ..services import projects as service
from .base import Blueprint

blp = Blueprint("projects", __name__, url_prefix="/api/projects",
                description="Projects hold models, skills and agents")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, ProjectOut(many=True))
def list_projects():
    """List projects."""
    return service.list_projects()


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(ProjectIn)
@blp.response(201, ProjectOut)
@blp.problems(409)
def create_project(body):
    """Create a project."""
    return service.create_project(body["name"])


@blp.route("/<name:project>", methods=["GET"])
@blp.response(200, ProjectOut)
@blp.problems(404)
def get_project(project):
    """Get one project."""
    return service.get_project(project)


@blp.route("/<name:project>", methods=["DELETE"])
@blp.arguments(ProjectDeleteArgs, location="query")
@blp.response(204)
@blp.problems(404, 409)
def delete_project(args, project):
    """Delete a project (refused while it holds objects, unless cascade=true, and for the
    default project)."""
    service.delete_project(project, cascade=args["cascade"])
