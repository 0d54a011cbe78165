"""Who may do what: /api/projects/<p>/members and the audit log /api/audit."""

from ..schemas.access import AuditArgs, AuditPageOut, MemberIn, MemberOut
from ..security import require_admin
from ..services import access as service
from ..services import audit as audit_service
from .base import Blueprint

blp = Blueprint("access", __name__, url_prefix="/api",
                description="Project members (owner, editor, viewer) and the audit log")


@blp.route("/projects/<name:project>/members", methods=["GET"])
@blp.response(200, MemberOut(many=True))
@blp.problems(403, 404)
def list_members(project):
    """List the members of a project and their roles."""
    return service.list_members(project)


@blp.route("/projects/<name:project>/members/<user:user>", methods=["PUT"])
@blp.arguments(MemberIn)
@blp.response(200, MemberOut)
@blp.problems(403, 404, 409)
def set_member(body, project, user):
    """Give a user a role in a project (owners and admins)."""
    return service.set_member(project, user, body["role"])


@blp.route("/projects/<name:project>/members/<user:user>", methods=["DELETE"])
@blp.response(204)
@blp.problems(403, 404, 409)
def remove_member(project, user):
    """Take a user's role in a project away (owners and admins; never the last owner)."""
    service.remove_member(project, user)


@blp.route("/audit", methods=["GET"])
@blp.arguments(AuditArgs, location="query")
@blp.response(200, AuditPageOut)
@blp.problems(403, 422)
def list_audit(args):
    """Read the audit log, newest first, a page at a time (admins)."""
    require_admin()
    records, cursor = audit_service.list_records(**args)
    return {"records": records, "next_cursor": cursor}
