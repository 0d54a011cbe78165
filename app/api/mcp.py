"""MCP (Model Context Protocol) over Streamable HTTP: POST /mcp, and an agent's tools at
/mcp/projects/<p>/agents/<a>. Stateless JSON answers; no GET stream (405). docs/mcp.md."""

import json

from flask import Response, current_app, request

from ..errors import BadRequest
from ..jsonio import parse_json_body
from ..mcp import agent, protocol, tools
from ..sql.encode import dumps
from .base import Blueprint

blp = Blueprint("mcp", __name__, url_prefix="/mcp",
                description="Model Context Protocol: Quarry's tools for AI clients")

_RPC_BODY = {"description": "A JSON-RPC 2.0 request or notification (or a batch of them)",
             "required": True,
             "content": {"application/json": {"schema": {"oneOf": [
                 {"type": "object"}, {"type": "array", "minItems": 1}]}}}}
_RPC_ANSWER = {"type": ["object", "array"], "description": "The JSON-RPC response(s)"}
_ACCEPTED = "Accepted: the message was a notification or a response; no body"


@blp.route("", methods=["POST"])
@blp.doc(requestBody=_RPC_BODY)
@blp.doc_response(200, _RPC_ANSWER)
@blp.alt_response(202, description=_ACCEPTED, success=True)
def serve_mcp():
    """Answer one MCP message with the server's tools (list_databases, query, …)."""
    return _answer(tools.server_tools())


@blp.route("/projects/<name:project>/agents/<name:agent_name>", methods=["POST"])
@blp.doc(requestBody=_RPC_BODY)
@blp.doc_response(200, _RPC_ANSWER)
@blp.alt_response(202, description=_ACCEPTED, success=True)
@blp.problems(404)
def serve_agent_mcp(project, agent_name):
    """Answer one MCP message with an agent's skills as tools."""
    return _answer(agent.agent_tools(project, agent_name))


def _answer(tool_set: protocol.ToolSet) -> Response:
    # What is not JSON-RPC at all (not JSON, not an object or a non-empty array, a revision
    # the server does not speak) is a 400 problem document, as on every route; what is
    # JSON-RPC gets its answer in JSON-RPC, errors included.
    try:
        payload = parse_json_body(request.get_data(cache=True),
                                  current_app.config["MAX_JSON_DEPTH"])
    except json.JSONDecodeError as exc:
        raise BadRequest(f"Invalid JSON body: {exc}", title="Invalid JSON") from None
    if not isinstance(payload, dict | list) or payload == []:
        raise BadRequest("The body must be one JSON-RPC 2.0 message (an object) or a "
                         "non-empty batch of them (an array)", title="Not JSON-RPC")
    version = request.headers.get(protocol.VERSION_HEADER)
    if problem := protocol.version_problem(version, payload):
        raise BadRequest(problem, title="Unsupported MCP revision")
    reply = protocol.handle(payload, tool_set, current_app.config["API_VERSION"],
                            {name.lower(): value for name, value in request.headers.items()})
    if reply.body is None:
        return Response(status=202)
    return Response(dumps(reply.body), status=reply.status, mimetype="application/json")
