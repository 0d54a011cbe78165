"""Agent completions: POST /api/projects/<p>/agents/<a>/completions (and /stream, as
server-sent events). docs/mcp.md#agent-completions."""

from flask import Response, stream_with_context

from ..mcp import completions as service
from ..schemas.completions import CompletionIn, CompletionOut
from ..sql.encode import dumps
from .base import Blueprint

blp = Blueprint("completions", __name__,
                url_prefix="/api/projects/<name:project>/agents/<name:agent_name>",
                description="An agent answers a question through its model and skills")


@blp.route("/completions", methods=["POST"])
@blp.arguments(CompletionIn)
@blp.response(200, CompletionOut)
@blp.problems(404, 422, 502)
def complete_agent(body, project, agent_name):
    """Answer the last question; the answer carries the statements the agent ran."""
    done = service.complete(project, agent_name, body["messages"])
    return {"message": {"role": "assistant", "content": done.answer,
                        "statements": done.statements}}


@blp.route("/completions/stream", methods=["POST"])
@blp.arguments(CompletionIn)
@blp.alt_response(200, schema={"type": "string"}, content_type="text/event-stream",
                  success=True, description="One event per statement run, then the answer "
                                            "(or an error)")
@blp.problems(404, 422)
def stream_agent_completion(body, project, agent_name):
    """The same loop as server-sent events, as each statement runs."""
    events = service.steps(project, agent_name, body["messages"])  # 404/422 before streaming
    return Response(stream_with_context(_sse(events)), mimetype="text/event-stream",
                    headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"})


def _sse(events):
    try:
        for event in events:
            yield b"data: " + dumps(event) + b"\n\n"
    except service.ModelEndpointFailed as exc:
        # The status line went out with the first byte: the failure is the last event.
        yield b"data: " + dumps({"type": "error", "title": exc.title,
                                 "detail": exc.detail}) + b"\n\n"
