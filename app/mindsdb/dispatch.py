"""The single entry of POST /api/sql/query: service statements first, then the data path."""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app

from ..rules.names import DEFAULT_PROJECT
from ..sql.errors import SqlError
from ..sql.execute import effective_timeout, run_statement
from ..sql.gate import check_count_params, gate
from ..sql.running import Statement
from ..sql.sources import current_sources
from ..sql.stream import TableStream, open_stream
from .router import service_statement

__all__ = ["execute_sql", "error_body"]

log = logging.getLogger(__name__)


def execute_sql(query: str, context_db: str | None, params: dict[str, Any] | None,
                *, timeout_s: float | None = None, statement: Statement | None = None,
                stream: bool = False) -> dict[str, Any] | TableStream:
    """Run one statement; the response body of API.md §1 (type table / ok / error).

    With ``stream``, a data statement answers an open ``TableStream`` instead (the caller
    closes it). ``statement`` lets another thread cancel the data statement while it runs.
    """
    db = context_db or DEFAULT_PROJECT
    try:
        answer = _service_statement(query, db, params)
        if answer is not None:
            return answer
        return _data_statement(query, db, params, timeout_s, statement, stream)
    except SqlError as exc:
        log.info("sql error %s: %s", exc.code, exc.message)
        return error_body(exc, db)


def _service_statement(query: str, db: str, params: dict[str, Any] | None
                       ) -> dict[str, Any] | None:
    """Statements about projects, models, skills, agents (``router.py``).

    Returns the response body, or None when ``query`` is not such a statement, so that it
    goes on to the data path.
    """
    return service_statement(query, db, params, current_sources())


def _data_statement(query: str, db: str, params: dict[str, Any] | None,
                    timeout_s: float | None, statement: Statement | None,
                    stream: bool) -> dict[str, Any] | TableStream:
    registry = current_sources()
    gated = gate(query, registry, db)
    check_count_params(gated, params)
    target = gated.source or registry.constants
    if statement is not None:
        statement.source, statement.sql = target.name, gated.sql
    if stream and statement is not None:
        config = current_app.config
        limit = config["SQL_STREAM_TIMEOUT_S"]
        return open_stream(target, gated.sql, params, gated.param_names,
                           timeout_s=min(timeout_s, limit) if timeout_s else limit,
                           max_rows=config["SQL_STREAM_MAX_ROWS"], statement=statement)
    result = run_statement(target, gated.sql, params, gated.param_names,
                           timeout_s=effective_timeout(target, timeout_s),
                           max_rows=target.max_rows,
                           max_bytes=current_app.config["SQL_MAX_RESPONSE_BYTES"],
                           statement=statement)
    body: dict[str, Any] = {
        "type": "table",
        "column_names": result.columns,
        "data": result.rows,
        "context": {"db": gated.source.name if gated.source else db},
    }
    if result.truncated:
        body["truncated"] = True
    return body


def error_body(error: SqlError, db: str) -> dict[str, Any]:
    return {"type": "error", "error_code": error.code, "error_message": error.message,
            "column_names": [], "context": {"db": db}}
