"""Run one leg on its data source, through the data path's read-only stream, into the
engine as Arrow record batches.

A leg is an ordinary statement of its source: it passes the gate (``sql/gate.py``) in the
source's dialect, runs in the source's READ ONLY transaction under its time limit, and is
read batch by batch through a server-side cursor (``sql/stream.py``), so a leg of millions
of rows never sits in Python whole: each batch becomes a record batch and goes into the
engine, which spills to disk past its memory limit.
"""

from __future__ import annotations

import time
from typing import Any

import sqlglot
from sqlglot import exp

from ..sql.errors import ErrorCode, SqlError
from ..sql.formats import (
    arrow_column,
    columns_of,
    declared_type,
    pa,  # pyarrow, imported with the first federated statement
    value_type,
)
from ..sql.gate import gate
from ..sql.running import Statement
from ..sql.sources import DataSource, SourceRegistry
from ..sql.stream import open_stream
from . import files
from .engine import Session
from .plan import Leg

# Column types a dynamic filter compares with keys (``dynamic.py``): PostgreSQL's OIDs and
# PyMySQL's FIELD_TYPE codes of integers, exact decimals, dates, timestamps without a time
# zone and character strings.
_KEY_KINDS = {
    "postgresql": {20: "int", 21: "int", 23: "int", 1700: "decimal", 1082: "date",
                   1114: "timestamp", 25: "text", 1042: "text", 1043: "text"},
    "mysql": {1: "int", 2: "int", 3: "int", 8: "int", 9: "int", 0: "decimal", 246: "decimal",
              10: "date", 12: "timestamp", 15: "text", 253: "text", 254: "text"},
}


def describe(registry: SourceRegistry, statement: Statement, deadline: float,
             source: DataSource, table: exp.Table) -> list[tuple[str, str | None]]:
    """The columns of ``table`` with their kind of key ("int", "text", None), asked of its
    source with a query that reads no row (a missing table fails here, in the source's
    own words, before any leg runs)."""
    if files.is_file_source(source):
        return [(name, None) for name in files.describe(table)]
    sql = exp.select("*").from_(table.copy()).limit(0).sql(dialect=source.sqlglot_dialect)
    stream = _open(registry, statement, deadline, source, sql, 1)
    try:
        for _ in stream.batches():  # none; read to the end so the connection is reused
            pass
        kinds = _KEY_KINDS.get(stream.dialect, {})
        types = stream.types or [None] * len(stream.columns)
        described = [(name, kinds.get(spec[0]) if spec else None)
                     for name, spec in zip(stream.columns, types, strict=True)]
    finally:
        stream.close()
    if source.dialect == "sqlite" and not table.db:
        declared = _sqlite_kinds(registry, statement, deadline, source, table.name)
        described = [(name, declared.get(name.lower())) for name, _ in described]
    return described


def _sqlite_kinds(registry: SourceRegistry, statement: Statement, deadline: float,
                  source: DataSource, name: str) -> dict[str, str]:
    """The key kinds of a SQLite table's columns from the types its CREATE TABLE declares,
    by SQLite's own affinity rules: INTEGER affinity ("INT" in the type) holds integers,
    TEXT affinity ("CHAR", "CLOB", "TEXT") text; other columns (and views) take no filter,
    since SQLite compares them by other rules."""
    sql = exp.select("sql").from_("sqlite_master").where(
        exp.and_(exp.column("type").eq(exp.Literal.string("table")),
                 exp.func("lower", exp.column("name")).eq(exp.Literal.string(name.lower())))
    ).sql(dialect="sqlite")
    stream = _open(registry, statement, deadline, source, sql, 1)
    try:
        rows = [row for batch in stream.batches() for row in batch]
    finally:
        stream.close()
    if not rows or not rows[0][0]:
        return {}
    try:
        create = sqlglot.parse_one(rows[0][0], read="sqlite")
    except sqlglot.errors.SqlglotError:
        return {}
    found: dict[str, str] = {}
    for column in create.find_all(exp.ColumnDef):
        declared = column.args.get("kind")
        text = declared.sql(dialect="sqlite").upper() if declared is not None else ""
        if "INT" in text:
            found[column.name.lower()] = "int"
        elif any(word in text for word in ("CHAR", "CLOB", "TEXT")):
            found[column.name.lower()] = "text"
    return found


def load(registry: SourceRegistry, statement: Statement, deadline: float, leg: Leg,
         session: Session, max_rows: int, sql: str | None = None) -> int:
    """Run ``leg`` and append its rows to the engine table ``leg.name``; its row count.
    ``sql``: the leg's query with a dynamic filter (the gate checks ``leg.sql``, the same
    query without it)."""
    if files.is_file_source(leg.source):
        return files.attach(leg, session)
    stream = _open(registry, statement, deadline, leg.source, leg.sql, max_rows, sql)
    rows = 0
    try:
        kinds = [declared_type(stream.dialect, spec) for spec in stream.types] \
            or [None] * len(stream.columns)
        names = [c.lower() for c in stream.columns]
        for batch in stream.batches():
            if stream.native == "arrow":  # read by ADBC, every type declared
                batch = _conform(batch, names, kinds)
            else:
                batch = record_batch(batch, names, kinds)
            session.append(leg.name, batch)
            rows += batch.num_rows
            leg.rows = rows
        if stream.truncated:
            raise SqlError(ErrorCode.TOO_MANY_ROWS,
                           f"The leg on {leg.label()} returns more than {max_rows} rows "
                           "(FEDERATION_MAX_LEG_ROWS); add a condition on that table")
        schema = pa.schema([pa.field(n, k if k is not None else pa.null())
                            for n, k in zip(names, kinds, strict=True)])
        session.ensure(leg.name, schema)
    finally:
        stream.close()
    return rows


def record_batch(batch: list, names: list[str], kinds: list[pa.DataType | None]
                  ) -> pa.RecordBatch:
    arrays = []
    for values, kind, name in zip(columns_of(batch, len(names)), kinds, names, strict=True):
        if kind is None:  # a type the driver does not declare (SQLite, MariaDB text)
            kind = pa.null() if all(v is None for v in values) else value_type(values)
        arrays.append(arrow_column(values, kind, name))
    return pa.RecordBatch.from_arrays(arrays, names=names)


def _conform(batch: pa.RecordBatch, names: list[str], kinds: list[pa.DataType | None]
             ) -> pa.RecordBatch:
    from ..sql.native import conform  # loaded already: ADBC made this batch

    return conform(batch.rename_columns(names),
                   pa.schema([pa.field(n, k) for n, k in zip(names, kinds, strict=True)]))


def _open(registry: SourceRegistry, statement: Statement, deadline: float,
          source: DataSource, sql: str, max_rows: int, filtered: str | None = None) -> Any:
    gated = gate(sql, registry, source.name)
    left = deadline - time.monotonic()
    if left <= 0:
        statement.stopped = statement.stopped or "time limit"
        raise statement.error()
    if filtered is not None and not gated.param_names:
        # The gated query and one more condition: a column compared with literals (the
        # keys, written by sqlglot); nothing in it that the gate did not check.
        return open_stream(gated.source or source, filtered, None, (),
                           timeout_s=left, max_rows=max_rows, statement=statement)
    return open_stream(gated.source or source, gated.sql, None, gated.param_names,
                       timeout_s=left, max_rows=max_rows, statement=statement)
