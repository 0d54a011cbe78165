"""The single entry of POST /api/sql/query: service statements first, then the data path."""

from __future__ import annotations

import logging
from typing import Any

from flask import current_app

from ..rules.names import DEFAULT_PROJECT
from ..sql.errors import SqlError
from ..sql.execute import effective_timeout, run_statement
from ..sql.gate import check_count_params, gate
from ..sql.sources import current_sources
from .router import service_statement

__all__ = ["execute_sql", "error_body"]

log = logging.getLogger(__name__)


def execute_sql(query: str, context_db: str | None, params: dict[str, Any] | None,
                *, timeout_s: float | None = None) -> dict[str, Any]:
    """Run one statement; the response body of API.md §1 (type table / ok / error)."""
    db = context_db or DEFAULT_PROJECT
    try:
        answer = _service_statement(query, db, params)
        if answer is not None:
            return answer
        return _data_statement(query, db, params, timeout_s)
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
                    timeout_s: float | None) -> dict[str, Any]:
    registry = current_sources()
    gated = gate(query, registry, db)
    check_count_params(gated, params)
    target = gated.source or registry.constants
    result = run_statement(target, gated.sql, params, gated.param_names,
                           timeout_s=effective_timeout(target, timeout_s),
                           max_rows=target.max_rows,
                           max_bytes=current_app.config["SQL_MAX_RESPONSE_BYTES"])
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
