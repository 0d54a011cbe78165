"""Jobs: /api/projects/<project>/jobs (MindsDB's routes)."""

from ..mindsdb import jobs as sql_jobs
from ..schemas.jobs import JobIn, JobOut, JobRunOut
from ..services import jobs as service
from .base import Blueprint

blp = Blueprint("jobs", __name__, url_prefix="/api/projects/<name:project>/jobs",
                description="Jobs: a project's statements run on a schedule, as their creator")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.response(200, JobOut(many=True))
@blp.problems(404)
def list_jobs(project):
    """List a project's jobs."""
    return service.list_jobs(project)


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(JobIn)
@blp.response(201, JobOut)
@blp.problems(403, 404, 409, 422)
def create_job(body, project):
    """Create a job (its statements are checked as CREATE JOB checks them)."""
    return sql_jobs.create_from_fields(project, body["job"])


@blp.route("/<name:name>", methods=["GET"])
@blp.response(200, JobOut)
@blp.problems(404)
def get_job(project, name):
    """Get a job."""
    return service.get_job(project, name)


@blp.route("/<name:name>", methods=["DELETE"])
@blp.response(204)
@blp.problems(403, 404)
def drop_job(project, name):
    """Drop a job and its history."""
    service.drop_job(project, name)


@blp.route("/<name:name>/history", methods=["GET"])
@blp.response(200, JobRunOut(many=True))
@blp.problems(404)
def job_history(project, name):
    """A job's runs, newest first."""
    return service.history(project, name)
