"""Quarry's MCP tools: ``list_databases`` and ``query`` (MindsDB's two), ``list_tables``,
``describe_model`` and ``predict``.

Each tool is the same call a REST route or a statement makes, with the caller's rights (set
on the request by the sign-in guard): ``query`` and ``list_databases`` run through
``mindsdb.queries.run_query`` exactly as POST /api/sql/query does (gate, read-only
connection, time limit, row cap, audit record); the others call the model and schema
services and add their audit record. A result is a table cut at ``MCP_MAX_ROWS``; any refusal
is a tool error (``isError``) carrying the message the SQL endpoint or REST route gives.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types
import orjson
from flask import current_app

from ..errors import QuarryError
from ..mindsdb import queries as statements
from ..mindsdb.router import refuse_changes
from ..rules.names import DEFAULT_PROJECT
from ..services import access, audit, console
from ..services import knowledge_bases as kb_service
from ..services import models as model_service
from ..sql.encode import dumps
from ..sql.errors import SqlError
from .protocol import ToolSet

INSTRUCTIONS = (
    "Quarry runs read-only SQL over the data sources you may query. list_databases names "
    "them, list_tables shows their tables and columns, query runs one SELECT (MySQL-like "
    "syntax; name tables as source.table), describe_model and predict use trained models.")


class ToolError(Exception):
    """A refusal to report as an MCP tool error (the model reads it and may try again)."""


@dataclass
class Tool:
    spec: types.Tool
    run: Callable[[dict[str, Any]], dict[str, Any]]  # arguments -> table


def _object(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required,
            "additionalProperties": False}


_CONTEXT = {"description": "Where unqualified names resolve: {\"db\": \"<data source or "
            "project>\"} (default: the project mindsdb)",
            "anyOf": [{"type": "object", "properties": {"db": {"type": "string"}}},
                      {"type": "string"}]}
_PROJECT = {"type": "string", "description": "The model's project (default mindsdb)"}
_MODEL = {"type": "string", "description": "The model's name (name.N for version N)"}
SEARCH_ARGUMENTS = {
    "text": {"type": "string", "description": "What to look for, in words"},
    "limit": {"type": "integer", "minimum": 1, "maximum": 100,
              "description": "How many chunks (default 10)"},
    "hybrid_search_alpha": {"type": "number", "minimum": 0, "maximum": 1,
                            "description": "Weight of meaning against words (1: meaning "
                                           "only, the default; 0: words only)"},
    "reranking": {"type": "boolean",
                  "description": "false: skip the knowledge base's reranking model, if it "
                                 "has one (default: use it)"}}


def server_tools() -> ToolSet:
    """The tools of /mcp."""
    tools = {
        "list_databases": Tool(types.Tool(
            name="list_databases",
            description="The databases you may use: data sources (type data), projects "
                        "(which hold models, skills and agents) and information_schema.",
            input_schema=_object({}, [])), _list_databases),
        "query": Tool(types.Tool(
            name="query",
            description="Run one read-only SQL statement (SELECT, SHOW, DESCRIBE) and get "
                        "its table; statements that change anything are refused. At most "
                        "the first rows come back, with truncated: true when more exist.",
            input_schema=_object({"query": {"type": "string", "description": "The SQL text"},
                                  "context": _CONTEXT}, ["query"])), _query),
        "list_tables": Tool(types.Tool(
            name="list_tables",
            description="The tables of the data sources you may query (or of one), each "
                        "column with its type: what to know before writing a query.",
            input_schema=_object({"database": {"type": "string",
                                               "description": "One data source (default: "
                                                              "all)"}}, [])), _list_tables),
        "describe_model": Tool(types.Tool(
            name="describe_model",
            description="What a trained model predicts, from which columns, how accurate "
                        "it is (attribute info, features or model).",
            input_schema=_object({"project": _PROJECT, "model": _MODEL,
                                  "attribute": {"type": "string",
                                                "enum": list(model_service.ATTRIBUTES)}},
                                 ["model"])), _describe_model),
        "search_knowledge_base": Tool(types.Tool(
            name="search_knowledge_base",
            description="Search a project's knowledge base (its documents' text) by meaning, "
                        "or by meaning and words: the best chunks first, each with its "
                        "document id, chunk_id, metadata and relevance.",
            input_schema=_object({"project": {"type": "string", "description": "The "
                                              "knowledge base's project (default mindsdb)"},
                                  "knowledge_base": {"type": "string"}, **SEARCH_ARGUMENTS},
                                 ["knowledge_base", "text"])), _search_knowledge_base),
        "predict": Tool(types.Tool(
            name="predict",
            description="Predict with a trained model: give the feature values of one row "
                        "(an object) or of several (a list of objects).",
            input_schema=_object({"project": _PROJECT, "model": _MODEL,
                                  "data": {"anyOf": [{"type": "object"},
                                                     {"type": "array",
                                                      "items": {"type": "object"}}]}},
                                 ["model", "data"])), _predict),
    }
    return tool_set(tools, INSTRUCTIONS)


def tool_set(tools: dict[str, Tool], instructions: str) -> ToolSet:
    def call(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        tool = tools.get(name)
        if tool is None:
            return error_result(f"No tool named {name[:80]!r}; tools: {', '.join(tools)}")
        try:
            return table_result(tool.run(arguments))
        except ToolError as exc:
            return error_result(str(exc))
    return ToolSet(lambda: [t.spec for t in tools.values()], call, instructions)


def table_result(table: dict[str, Any]) -> types.CallToolResult:
    """A table as an MCP result: structured, and as JSON text for clients that read text."""
    # Through the SQL endpoint's encoder: dates, decimals and bytes come out as there.
    encoded = dumps(table)
    return types.CallToolResult(content=[types.TextContent(type="text", text=encoded.decode())],
                                structured_content=orjson.loads(encoded))


def error_result(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)],
                                is_error=True)


def cut(columns: list[str], rows: list[Any], truncated: bool = False) -> dict[str, Any]:
    """A table of at most MCP_MAX_ROWS rows; ``truncated`` when rows were left out."""
    limit = current_app.config["MCP_MAX_ROWS"]
    if len(rows) > limit:
        rows, truncated = rows[:limit], True
    return {"columns": columns, "rows": [list(r) for r in rows], "truncated": truncated}


def text_argument(arguments: dict[str, Any], name: str, *, required: bool = True) -> str | None:
    value = arguments.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"Argument {name!r} must be a non-empty string")
    return value


def _context_db(arguments: dict[str, Any]) -> str | None:
    context = arguments.get("context")
    if context is None or isinstance(context, str):
        return context or None
    if isinstance(context, dict) and isinstance(context.get("db"), str | None):
        return context.get("db") or None
    raise ToolError("Argument 'context' must be {\"db\": \"<name>\"} or a database name")


def run_sql(query: str, context_db: str | None) -> dict[str, Any]:
    """One statement through the SQL endpoint's own path, refused first when it would
    change the service's objects (an AI reads; it does not create or drop)."""
    try:
        refuse_changes(query)
    except SqlError as exc:
        audit.record_statement(query, None, None, 0.0, "error", str(int(exc.code)),
                               history={"outcome": "error", "error_message": exc.message,
                                        "database": context_db or DEFAULT_PROJECT})
        raise ToolError(exc.message) from None
    answer = statements.run_query(query, context_db, None, timeout_s=None,
                                  response_format="json", user=access.actor_name())
    body = answer.body or {}
    if body.get("type") == "error":
        raise ToolError(body.get("error_message") or "The statement failed")
    if body.get("type") != "table":
        return cut([], [])
    return cut(body.get("column_names") or [], body.get("data") or [],
               bool(body.get("truncated")))


def _query(arguments: dict[str, Any]) -> dict[str, Any]:
    return run_sql(text_argument(arguments, "query"), _context_db(arguments))


def _list_databases(arguments: dict[str, Any]) -> dict[str, Any]:
    return run_sql("SHOW DATABASES", None)


def _recorded(label: str, source: str | None, run: Callable[[], dict[str, Any]]
              ) -> dict[str, Any]:
    """Run a tool that is no statement, with its audit record (who, what, rows, outcome)."""
    started = time.perf_counter()
    try:
        table = run()
    except QuarryError as exc:
        record_call(label, source, None, started, "error", exc.detail)
        raise ToolError(exc.detail) from None
    except SqlError as exc:
        record_call(label, source, None, started, "error", exc.message)
        raise ToolError(exc.message) from None
    record_call(label, source, len(table["rows"]), started, "ok", None)
    return table


def record_call(label: str, source: str | None, rows: int | None, started: float,
                outcome: str, message: str | None) -> None:
    """The audit record (and history entry) of a call that is no statement."""
    audit.record_statement(label, source, rows, (time.perf_counter() - started) * 1000.0,
                           outcome, None, history={
                               "outcome": "table" if outcome == "ok" else "error",
                               "error_message": message, "database": source})


def _list_tables(arguments: dict[str, Any]) -> dict[str, Any]:
    database = text_argument(arguments, "database", required=False)

    def run() -> dict[str, Any]:
        rows = []
        for source in console.schema(database)["data_sources"]:
            for table in source["tables"]:
                rows.extend([source["name"], table["name"], c["name"], c["type"]]
                            for c in table["columns"] or [{"name": "", "type": ""}])
        return cut(["database", "table", "column", "type"], rows)
    return _recorded(f"-- MCP list_tables {database or '(all)'}", database, run)


def _rows_table(records: list[dict[str, Any]]) -> dict[str, Any]:
    columns: list[str] = []
    for record in records:
        columns.extend(k for k in record if k not in columns)
    return cut(columns, [[r.get(c) for c in columns] for r in records])


def _model_args(arguments: dict[str, Any]) -> tuple[str, str]:
    project = text_argument(arguments, "project", required=False) or DEFAULT_PROJECT
    return project, text_argument(arguments, "model") or ""


def _describe_model(arguments: dict[str, Any]) -> dict[str, Any]:
    project, model = _model_args(arguments)
    attribute = text_argument(arguments, "attribute", required=False)
    return _recorded(f"-- MCP describe_model {project}.{model} {attribute or 'info'}", project,
                     lambda: _rows_table(model_service.describe_model(project, model,
                                                                      attribute)))


def _predict(arguments: dict[str, Any]) -> dict[str, Any]:
    project, model = _model_args(arguments)
    data = arguments.get("data")
    if not (isinstance(data, dict) or isinstance(data, list) and data
            and all(isinstance(r, dict) for r in data)):
        raise ToolError("Argument 'data' must be an object (one row) or a non-empty list of "
                        "objects")
    rows = 1 if isinstance(data, dict) else len(data)
    return _recorded(f"-- MCP predict {project}.{model} ({rows} rows)", project,
                     lambda: _rows_table(model_service.predict(project, model, data)))


def _search_knowledge_base(arguments: dict[str, Any]) -> dict[str, Any]:
    project = text_argument(arguments, "project", required=False) or DEFAULT_PROJECT
    return search_knowledge_base(project, text_argument(arguments, "knowledge_base") or "",
                                 arguments)


def search_knowledge_base(project: str, name: str, arguments: dict[str, Any]
                          ) -> dict[str, Any]:
    """A search of knowledge base ``project.name`` (``SEARCH_ARGUMENTS``), with the caller's
    rights, as SELECT … WHERE content = '…' answers it; in the audit log."""
    text = text_argument(arguments, "text") or ""
    limit, alpha = arguments.get("limit", 10), arguments.get("hybrid_search_alpha")
    if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 100:
        raise ToolError("Argument 'limit' must be a whole number from 1 to 100")
    if alpha is not None and (not isinstance(alpha, int | float) or isinstance(alpha, bool)
                              or not 0 <= alpha <= 1):
        raise ToolError("Argument 'hybrid_search_alpha' must be a number from 0 to 1")
    reranking = arguments.get("reranking")
    if reranking is not None and not isinstance(reranking, bool):
        raise ToolError("Argument 'reranking' must be true or false")

    def run() -> dict[str, Any]:
        hits = kb_service.search(project, name, content=text, limit=limit,
                                 alpha=None if alpha is None else float(alpha),
                                 reranking=reranking)
        return cut(list(kb_service.HIT_COLUMNS),
                   [[hit[c] for c in kb_service.HIT_COLUMNS] for hit in hits])
    return _recorded(f"-- MCP search_knowledge_base {project}.{name}", project, run)


__all__ = ["SEARCH_ARGUMENTS", "ToolError", "cut", "error_result", "record_call", "run_sql",
           "search_knowledge_base", "server_tools", "table_result", "tool_set"]
