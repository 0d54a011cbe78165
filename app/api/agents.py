"""Agents: /api/projects/<project>/agents (also served without the /api prefix)."""

from ..schemas.agents import AgentIn, AgentOut, AgentPut
from ..services import agents as service
from .base import Blueprint

blp = Blueprint("agents", __name__, url_prefix="/api/projects/<name:project>",
                description="Agents and the skills they use")


@blp.route("/agents", methods=["GET"], strict_slashes=False)
@blp.response(200, AgentOut(many=True))
@blp.problems(404)
def list_agents(project):
    """List agents with their skills."""
    return service.list_agents(project)


@blp.route("/agents", methods=["POST"], strict_slashes=False)
@blp.arguments(AgentIn)
@blp.response(201, AgentOut)
@blp.problems(404, 409, 422)
def create_agent(body, project):
    """Create an agent."""
    return service.create_agent(project, body["agent"])


@blp.route("/agents/<ref:ref>", methods=["GET"])
@blp.response(200, AgentOut)
@blp.problems(404)
def get_agent(project, ref):
    """Get an agent by name or ID."""
    return service.get_agent(project, ref)


@blp.route("/agents/<ref:ref>", methods=["PUT"])
@blp.arguments(AgentPut)
@blp.response(200, AgentOut)
@blp.problems(404, 409, 422)
def update_agent(body, project, ref):
    """Update an agent: null fields are kept, params merge, skills replace or add/remove."""
    return service.update_agent(project, ref, body["agent"])


@blp.route("/agents/<ref:ref>", methods=["DELETE"])
@blp.route("/agent/<ref:ref>", methods=["DELETE"], endpoint="delete_agent_singular")
@blp.response(204)
@blp.problems(404)
def delete_agent(project, ref):
    """Delete an agent (also at the singular path, as published)."""
    service.delete_agent(project, ref)
