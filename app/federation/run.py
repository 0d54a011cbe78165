"""A federated statement from start to end: plan, legs, engine, under one time limit.

The time limit is the statement's, not each leg's: every leg gets what is left of it, and
the engine is interrupted when it runs out. ``Statement`` (``sql/running.py``) is the one
handle a cancel reaches: each leg's connection is attached to it while the leg runs (so a
cancel from any worker reaches the leg in its database), then DuckDB's interrupt.
"""

from __future__ import annotations

import re
import threading
import time
import uuid
from dataclasses import dataclass, replace
from typing import Any

import duckdb
from sqlglot import exp

from ..sql.errors import ErrorCode, SqlError
from ..sql.execute import effective_timeout
from ..sql.running import TIME_LIMIT, Statement
from ..sql.sources import DataSource, SourceRegistry
from ..sql.syntax import parse_sqlglot
from . import legs as leg_runner
from .engine import Session, current_engine, engine_error
from .plan import Plan, parse, shown_names, split

EXPLAIN_COLUMNS = ["step", "source", "sql"]
_EXPLAIN = re.compile(r"\s*explain\s+(?=select\b|with\b|\()", re.IGNORECASE)


@dataclass
class Limits:
    timeout_s: float | None      # asked by the request (None: the sources' own)
    max_rows: int                # rows of the answer (beyond: truncated)
    max_bytes: int | None        # text and bytes of the answer
    max_leg_rows: int            # rows of one leg (beyond: an error)


@dataclass
class FederatedResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    sources: list[str]


def explained(query: str) -> str | None:
    """The statement of ``EXPLAIN <select>``, or None for any other text."""
    match = _EXPLAIN.match(query)
    if match is None:
        return None
    try:  # a plain prefix test would be fooled by a comment; the tokens must agree
        statements = parse_sqlglot(query[match.end():], None)
    except SqlError:
        return None
    return query[match.end():] if len(statements) == 1 else None


def sources_of(plan: Plan) -> list[str]:
    return list(dict.fromkeys(leg.source.name for leg in plan.legs))


def federated_select(query: str, registry: SourceRegistry, context: DataSource | None,
                     limits: Limits, statement: Statement | None) -> FederatedResult:
    """Run the SELECT ``query`` over the data sources it names."""
    statement = statement or Statement(uuid.uuid4().hex)
    parsed = parse(query, registry)  # a write is refused here, before any leg runs
    named = _named_sources(parsed, registry, context)
    timeout = _timeout(named, limits.timeout_s)
    deadline = time.monotonic() + timeout
    statement.deadline = deadline
    statement.source = ", ".join(source.name for source in named)
    statement.sql = query
    # A source's own row cap holds in a statement that reads it with others.
    limits = replace(limits, max_rows=min([limits.max_rows] + [s.max_rows for s in named]))
    session = current_engine().session()
    try:
        plan = split(parsed, registry, context, lambda source, table: _guard(
            statement, timeout, lambda: leg_runner.describe(registry, statement, deadline,
                                                            source, table)))
        statement.legs = plan.legs
        for leg in plan.legs:
            _guard(statement, timeout, lambda leg=leg: leg_runner.load(
                registry, statement, deadline, leg, session, limits.max_leg_rows))
        columns, rows, truncated = _engine(plan, session, statement, deadline, timeout,
                                           limits)
    finally:
        statement.detach(_Detached())
        session.close()
    return FederatedResult(columns, rows, truncated, sources_of(plan))


def explain(query: str, registry: SourceRegistry, context: DataSource | None,
            timeout_s: float | None, statement: Statement | None) -> list[tuple[str, ...]]:
    """Rows of EXPLAIN: each leg (its source and the SQL sent to it), then the engine."""
    statement = statement or Statement(uuid.uuid4().hex)
    parsed = parse(query, registry)
    timeout = _timeout(_named_sources(parsed, registry, context), timeout_s)
    deadline = time.monotonic() + timeout
    try:
        plan = split(parsed, registry, context, lambda source, table: _guard(
            statement, timeout, lambda: leg_runner.describe(registry, statement, deadline,
                                                            source, table)))
    finally:
        statement.detach(_Detached())
    rows = [(f"leg {i}: {leg.name}", leg.source.name, leg.sql)
            for i, leg in enumerate(plan.legs, 1)]
    rows.append(("engine", "duckdb", plan.engine_sql))
    return rows


def _named_sources(parsed: Any, registry: SourceRegistry, context: DataSource | None
                   ) -> list[DataSource]:
    """The data sources the statement's tables name (the legs' sources, known before the
    legs are planned)."""
    found: dict[str, DataSource] = {}
    for table in parsed.find_all(exp.Table):
        name = table.catalog or table.db
        source = (registry.get(name) if name else None) or context
        if source is not None:
            found.setdefault(source.name, source)
    return list(found.values())


def _timeout(sources: list[DataSource], requested: float | None) -> float:
    """The strictest time limit of the sources the statement names (a request may lower
    it, never raise it)."""
    limits = [effective_timeout(source, requested) for source in sources]
    return min(limits) if limits else float(requested or 30.0)


def _guard(statement: Statement, timeout: float, work: Any) -> Any:
    """Run one step; say who stopped it when it was stopped (a cancel, the time limit)."""
    try:
        return work()
    except SqlError as exc:
        if statement.stopped is not None and exc.code in (ErrorCode.TIME_LIMIT,
                                                          ErrorCode.QUERY_FAILED,
                                                          ErrorCode.CANCELLED):
            raise statement.error(timeout) from None
        raise


def _engine(plan: Plan, session: Session, statement: Statement, deadline: float,
            timeout: float, limits: Limits) -> tuple[list[str], list[tuple], bool]:
    if statement.stopped is not None:
        raise statement.error(timeout)
    statement.reattach("", session.interrupt)
    timer = threading.Timer(max(deadline - time.monotonic(), 0.0),
                            lambda: statement.cancel(TIME_LIMIT))
    timer.daemon = True
    timer.start()
    try:
        result = session.run(plan.engine_sql)
        columns = [d[0] for d in result.description or ()]
        rows = _fetch(result.to_arrow_reader(10_000), limits)
    except duckdb.InterruptException:
        raise statement.error(timeout) from None
    except duckdb.Error as exc:
        if statement.stopped is not None:
            raise statement.error(timeout) from None
        raise engine_error(exc) from None
    finally:
        timer.cancel()
    truncated = len(rows) > limits.max_rows
    return shown_names(plan, columns), rows[:limits.max_rows], truncated


def _fetch(reader: Any, limits: Limits) -> list[tuple]:
    rows: list[tuple] = []
    spent = 0
    for batch in reader:
        columns = [column.to_pylist() for column in batch.columns]
        chunk = list(zip(*columns, strict=True))
        rows.extend(chunk)
        if limits.max_bytes is not None:
            spent += sum([len(v) for row in chunk for v in row
                          if v.__class__ is str or v.__class__ is bytes])
            if spent > limits.max_bytes:
                raise SqlError(ErrorCode.RESPONSE_TOO_LARGE,
                               f"The result is larger than the limit of {limits.max_bytes} "
                               "bytes; select fewer rows or columns")
        if len(rows) > limits.max_rows:
            break
    return rows


class _Detached:
    """Stands for the connection ``Statement.detach`` forgets (the engine's has no info)."""

    info: dict[str, Any] = {}
