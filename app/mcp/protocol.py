"""JSON-RPC over MCP's Streamable HTTP transport, answered statelessly with JSON.

Quarry runs under gunicorn (WSGI), so the official SDK's server runtime (ASGI, anyio
streams, sessions held in memory by one process) does not fit: a request may land on any
worker. What is reused is the SDK's wire types (``mcp_types``, pydantic) to read requests and
to shape results, so the answers are exactly what the official client validates.

Two eras on the same endpoint, told apart per message:

- the handshake era (2024-11-05 … 2025-11-25): ``initialize`` with the revision the client
  wants, which it gets when it is one of ``HANDSHAKE_PROTOCOL_VERSIONS`` (else the newest of
  them, as the specification says), then ``tools/list``, ``tools/call``, ``ping``;
- the stateless era (``MODERN_PROTOCOL_VERSIONS``: 2026-07-28): no handshake; every request
  carries its revision and the client's capabilities in ``params._meta`` (and the
  ``MCP-Protocol-Version`` and ``Mcp-Method`` headers, which must agree with the body),
  ``server/discover`` answers the revisions, capabilities and instructions, and every result
  is tagged ``resultType`` and stamped with the server's identity. The envelope is checked by
  the SDK's own classifier (``mcp.shared.inbound``); its errors go out with the HTTP status
  the SDK's table gives them.

A message is of the stateless era when its ``_meta`` names a revision, or it is
``server/discover``. Nothing is kept between requests (no ``Mcp-Session-Id``): every request
is signed in and checked on its own, in either era.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types
from mcp_types.version import (
    HANDSHAKE_PROTOCOL_VERSIONS,
    LATEST_HANDSHAKE_VERSION,
    MODERN_PROTOCOL_VERSIONS,
)
from pydantic import ValidationError

VERSION_HEADER = "MCP-Protocol-Version"
SERVER_NAME = "quarry"
ALL_VERSIONS = (*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS)
# Methods of the handshake era that the stateless revision removed.
_HANDSHAKE_ONLY = {"initialize", "ping"}


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
    rule: a revision the server does not speak is refused; a stateless-era request is let
    through, to be answered in JSON-RPC with the revisions there are."""
    if not header or header in ALL_VERSIONS or _is_modern(payload):
        return None
    return (f"Unsupported {VERSION_HEADER}: {header[:40]!r}; supported: "
            f"{', '.join(ALL_VERSIONS)}")


def handle(payload: dict[str, Any] | list[Any], tools: ToolSet, server_version: str,
           headers: Mapping[str, str] | None = None) -> Reply:
    """Answer one POSTed JSON-RPC message, or a batch of them (as 2025-03-26 allows);
    ``headers``: the request's, by lower-case name (a stateless request's must agree with
    its body)."""
    if isinstance(payload, list):
        answers = [a for a in (_one(m, tools, server_version) for m in payload) if a is not None]
        return Reply(200, answers) if answers else Reply(202)
    if _is_modern(payload):
        return _modern(payload, tools, server_version, headers or {})
    answer = _one(payload, tools, server_version)
    if answer is None:
        return Reply(202)  # a notification or a response: accepted, nothing to say
    return Reply(200, answer)


def _is_modern(message: Any) -> bool:
    """Whether a message is of the stateless era: it names its revision in ``_meta``, or it
    is the era's ``server/discover``."""
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return message.get("method") == "server/discover" or (
        isinstance(meta, dict) and types.PROTOCOL_VERSION_META_KEY in meta)


# --- the stateless revision (2026-07-28) ---------------------------------------------------

_inbound: Any = None
_inbound_lock = threading.Lock()


def _classifier() -> Any:
    """The SDK's envelope classifier (``mcp/shared/inbound.py``), loaded by itself: it is
    a pure module (mcp_types and the standard library), while importing it through its
    package would start the SDK's client and server runtimes (anyio, httpx, starlette,
    uvicorn: some 350 modules) in a WSGI worker that needs none of them."""
    global _inbound
    with _inbound_lock:
        if _inbound is None:
            path = importlib.metadata.distribution("mcp").locate_file(
                "mcp/shared/inbound.py")
            spec = importlib.util.spec_from_file_location("quarry_mcp_inbound", str(path))
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            _inbound = module
        return _inbound


def _modern(message: dict[str, Any], tools: ToolSet, server_version: str,
            headers: Mapping[str, str]) -> Reply:
    inbound = _classifier()
    request_id = message.get("id")
    if message.get("jsonrpc") != "2.0" or "method" not in message:
        return _modern_error(inbound, request_id, types.INVALID_REQUEST,
                             "Not a JSON-RPC 2.0 request")
    if "id" not in message:
        return Reply(202)  # a notification: nothing to answer
    route = inbound.classify_inbound_request(message, headers=headers)
    if isinstance(route, inbound.InboundLadderRejection):
        data = route.data
        if route.code == types.UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
            # Every revision served, the handshake's too: a client of both eras then
            # falls back to initialize instead of giving up.
            data = {**data, "supported": list(ALL_VERSIONS)}
        return _modern_error(inbound, request_id, route.code, route.message, data)
    version = route.protocol_version
    try:
        request = types.JSONRPCRequest.model_validate(message)
        method = request.method
        if method in _HANDSHAKE_ONLY:
            raise _RpcError(types.METHOD_NOT_FOUND, f"{method} is not part of revision "
                            f"{version}: it is stateless, with no handshake (server/discover "
                            "says what this server speaks)")
        if method == "server/discover":
            result = _dump(types.DiscoverResult(
                supported_versions=list(ALL_VERSIONS), capabilities=_capabilities(),
                instructions=tools.instructions))
        else:
            result = _dispatch(request, tools, server_version)
        # The results are the same models as the handshake era's (tools, calls); the
        # revision requires the tag and asks for the server's identity on each.
        result.setdefault("resultType", "complete")
        result["_meta"] = {**(result.get("_meta") or {}), types.SERVER_INFO_META_KEY:
                           _dump(_implementation(server_version))}
    except ValidationError as exc:
        return _modern_error(inbound, request_id, types.INVALID_REQUEST, _first_problem(exc))
    except _RpcError as exc:
        return _modern_error(inbound, request_id, exc.code, exc.message, exc.data)
    return Reply(200, {"jsonrpc": "2.0", "id": request_id, "result": result})


def _modern_error(inbound: Any, request_id: Any, code: int, message: str,
                  data: Any = None) -> Reply:
    return Reply(inbound.ERROR_CODE_HTTP_STATUS.get(code, 200),
                 _error(request_id, code, message, data))


def _capabilities() -> types.ServerCapabilities:
    return types.ServerCapabilities(tools=types.ToolsCapability(list_changed=False))


def _implementation(server_version: str) -> types.Implementation:
    return types.Implementation(name=SERVER_NAME, version=server_version)


# --- the handshake era -------------------------------------------------------------------------

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
    raise _RpcError(types.METHOD_NOT_FOUND, f"Method not found: {method[:80]}")


def _initialize(params: dict[str, Any], tools: ToolSet, server_version: str) -> dict[str, Any]:
    init = _validated(types.InitializeRequestParams, params)
    wanted = init.protocol_version
    version = wanted if wanted in HANDSHAKE_PROTOCOL_VERSIONS else LATEST_HANDSHAKE_VERSION
    result = types.InitializeResult(
        protocol_version=version, capabilities=_capabilities(),
        server_info=_implementation(server_version), instructions=tools.instructions)
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

