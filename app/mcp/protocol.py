"""JSON-RPC over MCP's Streamable HTTP transport, answered statelessly with JSON.

Quarry runs under gunicorn (WSGI), so the official SDK's server runtime (ASGI, anyio
streams, sessions held in memory by one process) does not fit: a request may land on any
worker. What is reused is the SDK's wire types (``mcp_types``, pydantic) to read requests and
to shape results, so the answers are exactly what the official client validates.

Versions: a client of the handshake era sends ``initialize`` with the revision it wants and
gets it when it is one of ``HANDSHAKE_PROTOCOL_VERSIONS`` (else the newest of them, as the
specification says). A client of the 2026 era first probes ``server/discover``; it is answered
"unsupported protocol version" with the handshake revisions listed, which is how the official
client learns to fall back to ``initialize``. Nothing is kept between requests (no
``Mcp-Session-Id``): every request is signed in and checked on its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, LATEST_HANDSHAKE_VERSION
from pydantic import ValidationError

VERSION_HEADER = "MCP-Protocol-Version"
SERVER_NAME = "quarry"


@dataclass
class Reply:
    """What the view sends: an HTTP status and a JSON body (None: no body, 202)."""

    status: int
    body: Any = None


@dataclass
class ToolSet:
    """The tools one endpoint serves: their descriptions and the function that runs one."""

    list_tools: Callable[[], list[types.Tool]]
    call_tool: Callable[[str, dict[str, Any]], types.CallToolResult]
    instructions: str


def version_problem(header: str | None, payload: Any) -> str | None:
    """Why the ``MCP-Protocol-Version`` header is refused (400), or None. The transport's
    rule: a revision the server does not speak is refused; ``server/discover`` (the 2026
    probe) is let through, to be answered with the revisions there are."""
    if not header or header in HANDSHAKE_PROTOCOL_VERSIONS or _is_discover(payload):
        return None
    return (f"Unsupported {VERSION_HEADER}: {header[:40]!r}; supported: "
            f"{', '.join(HANDSHAKE_PROTOCOL_VERSIONS)}")


def handle(payload: dict[str, Any] | list[Any], tools: ToolSet, server_version: str) -> Reply:
    """Answer one POSTed JSON-RPC message, or a batch of them (as 2025-03-26 allows)."""
    if isinstance(payload, list):
        answers = [a for a in (_one(m, tools, server_version) for m in payload) if a is not None]
        return Reply(200, answers) if answers else Reply(202)
    answer = _one(payload, tools, server_version)
    if answer is None:
        return Reply(202)  # a notification or a response: accepted, nothing to say
    return Reply(200, answer)


def _is_discover(payload: Any) -> bool:
    return isinstance(payload, dict) and payload.get("method") == "server/discover"


def _one(message: Any, tools: ToolSet, server_version: str) -> dict[str, Any] | None:
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return _error(None, types.INVALID_REQUEST, "Not a JSON-RPC 2.0 message")
    if "method" not in message:
        return None  # a response to a request of ours: we send none, so nothing to match
    if "id" not in message:
        return None  # notifications/initialized, notifications/cancelled …: no answer
    try:
        request = types.JSONRPCRequest.model_validate(message)
    except ValidationError as exc:
        return _error(None, types.INVALID_REQUEST, _first_problem(exc))
    try:
        result = _dispatch(request, tools, server_version)
    except _RpcError as exc:
        return _error(request.id, exc.code, exc.message, exc.data)
    return {"jsonrpc": "2.0", "id": request.id, "result": result}


class _RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def _dispatch(request: types.JSONRPCRequest, tools: ToolSet, server_version: str
              ) -> dict[str, Any]:
    params = request.params or {}
    method = request.method
    if method == "initialize":
        return _initialize(params, tools, server_version)
    if method == "ping":
        return {}
    if method == "tools/list":
        return _dump(types.ListToolsResult(tools=tools.list_tools()))
    if method == "tools/call":
        call = _validated(types.CallToolRequestParams, params)
        return _dump(tools.call_tool(call.name, call.arguments or {}))
    if method == "server/discover":
        raise _RpcError(types.UNSUPPORTED_PROTOCOL_VERSION,
                        "This server speaks the initialize handshake",
                        {"supported": list(HANDSHAKE_PROTOCOL_VERSIONS),
                         "requested": str(params.get("_meta", {}).get(
                             types.PROTOCOL_VERSION_META_KEY, ""))[:40]})
    raise _RpcError(types.METHOD_NOT_FOUND, f"Method not found: {method[:80]}")


def _initialize(params: dict[str, Any], tools: ToolSet, server_version: str) -> dict[str, Any]:
    init = _validated(types.InitializeRequestParams, params)
    wanted = init.protocol_version
    version = wanted if wanted in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    result = types.InitializeResult(
        protocol_version=version,
        capabilities=types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False)),
        server_info=types.Implementation(name=SERVER_NAME, version=server_version),
        instructions=tools.instructions)
    return _dump(result)


def _validated(model: Any, params: dict[str, Any]) -> Any:
    try:
        return model.model_validate(params)
    except ValidationError as exc:
        raise _RpcError(types.INVALID_PARAMS, _first_problem(exc)) from None


def _first_problem(exc: ValidationError) -> str:
    problem = exc.errors()[0]
    where = ".".join(str(p) for p in problem["loc"]) or "params"
    return f"Invalid {where}: {problem['msg']}"


def _dump(model: Any) -> dict[str, Any]:
    return model.model_dump(by_alias=True, mode="json", exclude_none=True)


def _error(request_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}

