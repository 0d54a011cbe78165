"""A SELECT over rows Quarry made itself — a prediction JOIN's rows: each row of the table
beside its prediction — run in the engine: GROUP BY, HAVING, aggregates and functions,
which the service's own evaluator (``mindsdb/relation.py``) leaves out.

The caller writes the statement with ``FROM quarry_rows`` in place of its JOIN; it is read
as a federated one is (``plan.parse``: one read-only SELECT, every function on the engine's
allow-list) and may read no other table. The rows become that one engine table, whose
columns are numbered (``c0``, ``c1`` …, so that ``t.y`` and ``m.y`` stay apart); each column
reference (``t.x``, ``m.y``, a bare name: the preferred side's when both sides hold it, as
in the evaluator) is rewritten to its number. The answer keeps the names the statement
shows.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlglot import exp

from ..sql.errors import ErrorCode, SqlError
from ..sql.sources import SourceRegistry
from .engine import EngineError, current_engine, engine_error
from .legs import record_batch
from .plan import parse

ROWS_TABLE = "quarry_rows"


def select_rows(query: str, columns: list[tuple[str, str, bool]], rows: list[tuple],
                prefer: str | None, registry: SourceRegistry, *, max_rows: int,
                timeout_s: float, shown: list[str | None] | None = None
                ) -> tuple[list[str], list[tuple]]:
    """Names and rows of the SELECT ``query`` over ``rows``, whose ``columns`` are
    (qualifier, name, listed by a bare ``*``); ``prefer``: the qualifier a bare name that
    several qualifiers hold means; ``shown``: per item of the SELECT list, the name of an
    expression without alias as the caller wrote it (None: the engine's reading). At most
    ``max_rows`` rows (TOO_MANY_ROWS beyond)."""
    statement = parse(query, registry)
    if not isinstance(statement, exp.Select):
        raise SqlError(ErrorCode.UNSUPPORTED, "Over a model's predictions only a SELECT runs")
    for table in statement.find_all(exp.Table):
        if table.name.lower() != ROWS_TABLE or table.db or table.catalog:
            raise SqlError(ErrorCode.UNSUPPORTED,
                           f"A SELECT over a model's predictions reads only the joined rows, "
                           f"not {table.sql()}")
    numbered = _Columns(columns, prefer)
    names = _expand_stars(statement, numbered, shown or [])
    aliases = {e.alias.lower() for e in statement.expressions if isinstance(e, exp.Alias)}
    for column in list(statement.find_all(exp.Column)):
        if isinstance(column.this, exp.Star):
            continue
        if not column.table and column.name.lower() in aliases and \
                numbered.find(column, required=False) is None:
            continue  # ORDER BY n, HAVING n: the alias of an answer's column
        column.replace(exp.column(numbered.find(column)))
    sql = statement.sql(dialect="duckdb")
    kinds = [None] * len(columns)
    batch = record_batch(rows, [f"c{i}" for i in range(len(columns))], kinds)
    return names, _run(sql, batch, max_rows, timeout_s)


class _Columns:
    def __init__(self, columns: list[tuple[str, str, bool]], prefer: str | None) -> None:
        self.columns = columns
        self.prefer = (prefer or "").lower()

    def find(self, column: exp.Column, required: bool = True) -> str | None:
        name, qualifier = column.name.lower(), column.table.lower()
        matches = [i for i, (q, n, _) in enumerate(self.columns) if n.lower() == name
                   and (not qualifier or q.lower() == qualifier)]
        if len(matches) > 1:
            matches = [i for i in matches if self.columns[i][0].lower() == self.prefer] \
                or matches
        if not matches and not required:
            return None
        if not matches:
            known = ", ".join(dict.fromkeys(f"{q}.{n}" for q, n, _ in self.columns))
            raise SqlError(ErrorCode.QUERY_FAILED,
                           f"Column not found: {column.sql()} (columns: {known})")
        return f"c{matches[0]}"

    def star(self, qualifier: str | None) -> list[int]:
        return [i for i, (q, _, listed) in enumerate(self.columns)
                if (q.lower() == qualifier if qualifier else listed)]


def _expand_stars(statement: exp.Select, numbered: _Columns, shown: list[str | None]
                  ) -> list[str]:
    """Replace ``*`` and ``t.*`` by the columns they list; the answer's column names (an
    alias, a column's own name, or the expression as written)."""
    names: list[str] = []
    expressions: list[exp.Expression] = []
    for position, item in enumerate(statement.expressions):
        star = isinstance(item, exp.Star) or (isinstance(item, exp.Column)
                                              and isinstance(item.this, exp.Star))
        if star:
            qualifier = item.table.lower() if isinstance(item, exp.Column) else None
            for i in numbered.star(qualifier or None):
                expressions.append(exp.column(f"c{i}"))
                names.append(numbered.columns[i][1])
            continue
        written = shown[position] if position < len(shown) else None
        names.append(item.alias_or_name if isinstance(item, exp.Alias | exp.Column)
                     else written or item.sql())
        expressions.append(item)
    statement.set("expressions", expressions)
    return names


def _run(sql: str, batch: Any, max_rows: int, timeout_s: float) -> list[tuple]:
    session = current_engine().session()
    timer = threading.Timer(timeout_s, session.interrupt)
    timer.daemon = True
    try:
        session.append(ROWS_TABLE, batch)
        timer.start()
        session.run(sql)
        out: list[tuple] = []
        for part in session.batches():
            out.extend(zip(*[c.to_pylist() for c in part.columns], strict=True))
            if len(out) > max_rows:
                raise SqlError(ErrorCode.TOO_MANY_ROWS,
                               f"The SELECT over the predictions returns more than {max_rows} "
                               "rows; narrow it down (WHERE, LIMIT)")
        return out
    except EngineError as exc:
        if exc.interrupted:
            raise SqlError(ErrorCode.TIME_LIMIT,
                           f"The SELECT over the predictions ran past its time limit of "
                           f"{timeout_s:g} s") from None
        raise engine_error(exc) from None
    finally:
        timer.cancel()
        session.close()
