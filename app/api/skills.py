"""Skills: /api/projects/<project>/skills (also served without the /api prefix)."""

from ..schemas.skills import SkillIn, SkillListArgs, SkillOut, SkillPut
from ..services import skills as service
from .base import Blueprint

blp = Blueprint("skills", __name__, url_prefix="/api/projects/<name:project>/skills",
                description="Skills that the agents of a project use")


@blp.route("", methods=["GET"], strict_slashes=False)
@blp.arguments(SkillListArgs, location="query")
@blp.response(200, SkillOut(many=True))
@blp.problems(404)
def list_skills(args, project):
    """List skills, optionally only those of one agent (agent_id or agent)."""
    return service.list_skills(project, agent_id=args.get("agent_id"), agent=args.get("agent"))


@blp.route("", methods=["POST"], strict_slashes=False)
@blp.arguments(SkillIn)
@blp.response(201, SkillOut)
@blp.problems(404, 409, 422)
def create_skill(body, project):
    """Create a skill."""
    return service.create_skill(project, body["skill"])


@blp.route("/<ref:ref>", methods=["GET"])
@blp.response(200, SkillOut)
@blp.problems(404)
def get_skill(project, ref):
    """Get a skill by name or ID."""
    return service.get_skill(project, ref)


@blp.route("/<ref:ref>", methods=["PUT"])
@blp.arguments(SkillPut)
@blp.response(200, SkillOut)
@blp.alt_response(201, schema=SkillOut, description="Created: no skill had that name")
@blp.problems(404, 409, 422)
def put_skill(body, project, ref):
    """Update a skill (params merge key by key); create it if it does not exist."""
    skill, created = service.put_skill(project, ref, body["skill"])
    return skill, 201 if created else 200


@blp.route("/<ref:ref>", methods=["DELETE"])
@blp.response(204)
@blp.problems(404)
def delete_skill(project, ref):
    """Delete a skill; agents that used it no longer do."""
    service.delete_skill(project, ref)
