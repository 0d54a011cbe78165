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


def describe(registry: SourceRegistry, statement: Statement, deadline: float,
             source: DataSource, table: exp.Table) -> list[str]:
    """The column names of ``table``, asked of its source with a query that reads no row
    (a missing table fails here, in the source's own words, before any leg runs)."""
    if files.is_file_source(source):
        return files.describe(table)
    sql = exp.select("*").from_(table.copy()).limit(0).sql(dialect=source.sqlglot_dialect)
    stream = _open(registry, statement, deadline, source, sql, 1)
    try:
        for _ in stream.batches():  # none; read to the end so the connection is reused
            pass
        return list(stream.columns)
    finally:
        stream.close()


def load(registry: SourceRegistry, statement: Statement, deadline: float, leg: Leg,
         session: Session, max_rows: int) -> int:
    """Run ``leg`` and append its rows to the engine table ``leg.name``; its row count."""
    if files.is_file_source(leg.source):
        return files.attach(leg, session)
    stream = _open(registry, statement, deadline, leg.source, leg.sql, max_rows)
    rows = 0
    try:
        kinds = [declared_type(stream.dialect, spec) for spec in stream.types] \
            or [None] * len(stream.columns)
        names = [c.lower() for c in stream.columns]
        for batch in stream.batches():
            if stream.native == "arrow":  # read by ADBC, every type declared
                batch = _conform(batch, names, kinds)
            else:
                batch = _record_batch(batch, names, kinds)
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


def _record_batch(batch: list, names: list[str], kinds: list[pa.DataType | None]
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
          source: DataSource, sql: str, max_rows: int) -> Any:
    gated = gate(sql, registry, source.name)
    left = deadline - time.monotonic()
    if left <= 0:
        statement.stopped = statement.stopped or "time limit"
        raise statement.error()
    return open_stream(gated.source or source, gated.sql, None, gated.param_names,
                       timeout_s=left, max_rows=max_rows, statement=statement)
