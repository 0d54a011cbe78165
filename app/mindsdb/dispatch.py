"""The single entry of POST /api/sql/query: service statements first, then the data path."""

from __future__ import annotations

import logging
import time
from typing import Any

from flask import current_app
from sqlglot import exp

from ..errors import EngineUnavailable, NotFound
from ..federation import run as federation
from ..federation.route import route
from ..rules.names import DEFAULT_PROJECT
from ..services import access, audit
from ..services import console as console_service
from ..services import sqlviews as view_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.execute import effective_timeout, run_statement
from ..sql.gate import check_count_params, gate
from ..sql.running import Statement
from ..sql.sources import unknown_source
from ..sql.stream import TableStream, open_stream
from ..telemetry import current_metrics
from .context import Context
from .masking import MaskedStatement, mask_statement
from .router import service_statement
from .views import expand as expand_views

__all__ = ["account_stream", "console_schema", "execute_sql", "error_body",
           "record_stream_start"]

log = logging.getLogger(__name__)


def execute_sql(query: str, context_db: str | None, params: dict[str, Any] | None,
                *, timeout_s: float | None = None, statement: Statement | None = None,
                stream: bool = False, masked: MaskedStatement | None = None
                ) -> dict[str, Any] | TableStream:
    """Run one statement; the response body of API.md §1 (type table / ok / error).

    With ``stream``, a data statement answers an open ``TableStream`` instead (the caller
    closes it). ``statement`` lets another thread cancel the data statement while it runs.
    ``masked``: the statement as it is recorded and its errors are worded, secrets masked
    (made here when not given).
    """
    masked = masked or mask_statement(query)
    db = context_db or DEFAULT_PROJECT
    started = time.perf_counter()
    reached: list[str] = []  # the data source the statement ran on, once known
    try:
        answer = _service_statement(query, db, params, statement)
        if answer is None:
            answer = _data_statement(query, db, params, timeout_s, statement, stream, reached)
    except SqlError as exc:
        # A message may quote the statement (a syntax error's token): never its secrets.
        message = masked.scrub(exc.message)
        log.info("sql error %s: %s", exc.code, message)
        answer = error_body(SqlError(exc.code, message), db)
    except EngineUnavailable as exc:
        # Answered 503 (the statement may be sent again later), and audited as it ended.
        _account(masked.text, error_body(SqlError(ErrorCode.SOURCE_DOWN, exc.detail), db),
                 reached[0] if reached else None, time.perf_counter() - started, db)
        raise
    source = reached[0] if reached else None
    if isinstance(answer, TableStream):
        return answer  # recorded before its first byte (record_stream_start) and as it ends
    _account(masked.text, answer, source, time.perf_counter() - started, db)
    return answer


def _account(query: str, answer: dict[str, Any], source: str | None, seconds: float,
             db: str) -> None:
    """The statement's audit record, history row and metrics: who ran what, where, how it
    ended. Written before the answer goes out; a store error is raised (answered 503)."""
    kind = answer.get("type")
    failed = kind == "error"
    rows = len(answer["data"]) if isinstance(answer.get("data"), list) else None
    outcome = "error" if failed else "ok"
    code = str(answer["error_code"]) if failed else None
    current_metrics().sql_statement(source or "", outcome, seconds, rows or 0)
    if failed:
        shown = "cancelled" if answer["error_code"] == ErrorCode.CANCELLED else "error"
        history = {"outcome": shown, "error_message": answer.get("error_message")}
    else:
        history = {"outcome": "table" if kind == "table" else "ok"}
    history["database"] = (answer.get("context") or {}).get("db") or db
    audit.record_statement(query, source, rows, seconds * 1000.0, outcome, code,
                           history=history)


# The console's tree reads each view's columns: a short limit each, and a bound on how many,
# so that a slow view or a project of thousands cannot hold the tree up.
VIEW_COLUMNS_TIMEOUT_S = 5.0
VIEWS_DESCRIBED = 200


def console_schema(database: str | None) -> dict[str, Any]:
    """The console's schema (``services/console.py``); without ``database``, each
    project's views with their columns too."""
    answer = console_service.schema(database)
    if database is None:
        for project in answer["projects"]:
            project["views"] = describe_views(project["name"])
    return answer


def describe_views(project: str) -> list[dict[str, Any]]:
    """The views of ``project`` (none when the caller may not read it), each with the names
    of the columns it answers, or the error reading it gives (its columns then unknown).

    Each is read as ``SELECT * FROM project.view LIMIT 0`` on the data path, with the
    caller's rights: the database plans the expanded statement and stops before its first
    row (``query_columns``). Not the user's statements: no audit record, no history row.
    """
    try:
        views = view_service.list_views(project)
    except NotFound:
        return []
    described = []
    for number, view in enumerate(views):
        entry: dict[str, Any] = {"name": view["name"], "columns": []}
        described.append(entry)
        if number >= VIEWS_DESCRIBED:
            entry["error"] = f"Columns are read for the first {VIEWS_DESCRIBED} views only"
            continue
        query = exp.select("*").from_(exp.table_(view["name"], db=project)).limit(0).sql()
        try:
            answer = _data_statement(query, project, None, VIEW_COLUMNS_TIMEOUT_S, None,
                                     False, [])
        except SqlError as exc:
            entry["error"] = exc.message
            continue
        entry["columns"] = [{"name": str(c), "type": ""} for c in answer["column_names"]]
    return described


def record_stream_start(query: str, stream: TableStream) -> int:
    """The audit record of a streamed statement, written before its first byte (outcome
    ``streaming``, no rows yet); its id. A store error is raised: the stream is not sent."""
    seconds = time.monotonic() - stream.statement.started
    return audit.record_statement(query, stream.source.name, None, seconds * 1000.0,
                                  audit.STREAMING, None)


def account_stream(query: str, stream: TableStream, context_db: str | None,
                   record_id: int) -> None:
    """Complete a streamed statement's record as its stream ends: the rows that went out,
    the time from its start to its last byte, and whether it reached its end (or its row
    limit); its history row and metrics."""
    statement = stream.statement
    seconds = time.monotonic() - statement.started
    finished = stream.complete or stream.truncated
    rows = statement.rows_sent
    current_metrics().sql_statement(stream.source.name or "", "ok" if finished else "error",
                                    seconds, rows)
    history: dict[str, Any] = {"database": stream.source.name or context_db or DEFAULT_PROJECT}
    if finished:
        history["outcome"] = "table"
    else:
        history.update(outcome="error", error_message="The stream stopped before the last "
                       f"row ({rows} rows went out): cancelled, failed or left by the client")
    audit.finish_statement(record_id, rows, seconds * 1000.0, "ok" if finished else "error",
                           history=history, statement=query)


def _service_statement(query: str, db: str, params: dict[str, Any] | None,
                       statement: Statement | None = None) -> dict[str, Any] | None:
    """Statements about projects, models, skills, agents (``router.py``).

    Returns the response body, or None when ``query`` is not such a statement, so that it
    goes on to the data path.
    """
    return service_statement(query, db, params, access.queryable_sources(), statement)


def _data_statement(query: str, db: str, params: dict[str, Any] | None,
                    timeout_s: float | None, statement: Statement | None,
                    stream: bool, reached: list[str]) -> dict[str, Any] | TableStream:
    registry = access.queryable_sources()
    # EXPLAIN <select>: the SELECT goes the same way (views, gate, rights), and the plan
    # of where it runs is the answer (never EXPLAIN ANALYZE: it would run it).
    explained = federation.explained(query)
    if explained is not None:
        query = explained
    # Views are expanded into the statement first: what follows (the gate, the caller's
    # rights on each data source, the federation) holds for the expanded text. A statement
    # the gate takes as it is names no view (projects and data sources share one name
    # space), and the gate's answer is cached: only the others are parsed for views.
    if not _gate_takes(query, registry, db):
        query = expand_views(query, db, Context(db=db, registry=registry, params=params)) \
            or query
    where = route(query, registry, db)  # one source, or the engine (app/federation/)
    if where.source is not None:
        reached.append(where.source.name)
        if not access.may_query(where.source.name):
            # Unreachable through the caller's view (a source it may not query does not
            # exist there); kept as the last guard, answering as for a missing source.
            raise unknown_source(where.source.name, registry.names())
    if where.engine:
        if explained is not None:
            return _federated_explain(query, registry, db, params, timeout_s, statement)
        return _federated(query, registry, db, params, timeout_s, statement, stream,
                          reached)
    gated = where.gated
    check_count_params(gated, params)
    target = gated.source or registry.constants
    if statement is not None:
        statement.source, statement.sql = target.name, gated.sql
    if stream and statement is not None and explained is None:
        config = current_app.config
        limit = config["SQL_STREAM_TIMEOUT_S"]
        return open_stream(target, gated.sql, params, gated.param_names,
                           timeout_s=min(timeout_s, limit) if timeout_s else limit,
                           max_rows=config["SQL_STREAM_MAX_ROWS"], statement=statement)
    result = run_statement(target, gated.sql, params, gated.param_names,
                           timeout_s=effective_timeout(target, timeout_s),
                           max_rows=target.max_rows,
                           max_bytes=current_app.config["SQL_MAX_RESPONSE_BYTES"],
                           statement=statement, plan=explained is not None)
    body: dict[str, Any] = {
        "type": "table",
        "column_names": result.columns,
        "data": result.rows,
        "context": {"db": gated.source.name if gated.source else db},
    }
    if result.truncated:
        body["truncated"] = True
    return body


def _gate_takes(query: str, registry: Any, db: str) -> bool:
    try:
        gate(query, registry, db)
    except SqlError:
        return False
    return True


def _federated(query: str, registry: Any, db: str, params: dict[str, Any] | None,
               timeout_s: float | None, statement: Statement | None, stream: bool,
               reached: list[str]
               ) -> dict[str, Any] | TableStream:
    config = current_app.config
    if stream and statement is not None:
        limit = config["SQL_STREAM_TIMEOUT_S"]
        limits = federation.Limits(timeout_s=min(timeout_s, limit) if timeout_s else limit,
                                   max_rows=config["SQL_STREAM_MAX_ROWS"], max_bytes=None,
                                   max_leg_rows=config["FEDERATION_MAX_LEG_ROWS"],
                                   stream=True, params=params)
        return federation.open_federated_stream(query, registry, registry.get(db), limits,
                                                statement)
    limits = federation.Limits(timeout_s=timeout_s, max_rows=config["SQL_MAX_ROWS"],
                               max_bytes=config["SQL_MAX_RESPONSE_BYTES"],
                               max_leg_rows=config["FEDERATION_MAX_LEG_ROWS"],
                               params=params)
    result = federation.federated_select(query, registry, registry.get(db), limits,
                                         statement)
    reached.append(",".join(result.sources))
    body: dict[str, Any] = {"type": "table", "column_names": result.columns,
                            "data": result.rows, "context": _engine_context(db, result)}
    if result.truncated:
        body["truncated"] = True
    return body


def _engine_context(db: str, result: federation.FederatedResult) -> dict[str, Any]:
    """The answer's context: its database, and the engine that joined the legs when it
    is not the default one (and why, when Spark was asked for and DuckDB ran it)."""
    return {"db": db, **federation.engine_context(result.engine, result.note)}


def _federated_explain(query: str, registry: Any, db: str, params: dict[str, Any] | None,
                       timeout_s: float | None, statement: Statement | None
                       ) -> dict[str, Any]:
    rows = federation.explain(query, registry, registry.get(db), timeout_s, statement,
                              params)
    return {"type": "table", "column_names": federation.EXPLAIN_COLUMNS, "data": rows,
            "context": {"db": db}}


def error_body(error: SqlError, db: str) -> dict[str, Any]:
    return {"type": "error", "error_code": error.code, "error_message": error.message,
            "column_names": [], "context": {"db": db}}
