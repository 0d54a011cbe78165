"""Run one leg on its data source, through the data path's read-only stream, into the
engine as Arrow record batches.

A leg is an ordinary statement of its source: it passes the gate (``sql/gate.py``) in the
source's dialect, runs in the source's READ ONLY transaction under its time limit, and is
read batch by batch through a server-side cursor (``sql/stream.py``), so a leg of millions
of rows never sits in Python whole: each batch becomes a record batch and goes into the
engine, which spills to disk past its memory limit.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import sqlglot
from flask import current_app
from sqlglot import exp

from ..lru import LruCache
from ..sql.errors import ErrorCode, SqlError
from ..sql.formats import (
    arrow_column,
    columns_of,
    declared_type,
    dumps_rows,
    pa,  # pyarrow, imported with the first federated statement
    value_type,
)
from ..sql.gate import gate
from ..sql.pgtypes import JSON, JSONB
from ..sql.running import Statement
from ..sql.sources import DataSource, SourceRegistry
from ..sql.stream import Shape, open_stream
from . import files
from .dynamic import whole
from .engine import Session, json_field
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


# A table's columns and key kinds, as ``describe`` answers them.
Columns = list[tuple[str, str | None]]


@dataclass(frozen=True)
class Described:
    """A table's description kept by the process (``Engine.described``): valid while its
    source is the same object (a source changed through the store is a new one) and for
    FEDERATION_CATALOG_TTL_S after it was read."""

    source: DataSource
    read_at: float
    columns: Columns


# Runs describe jobs (each given its own statement), all at once; their answers in order.
RunJobs = Callable[[list[Callable[[Statement], Any]]], list[Any]]


def describe_key(source: DataSource, table: exp.Table) -> tuple[str, str]:
    """How a table is named in ``describe_tables``' answer and in the description cache."""
    return source.name.lower(), table.sql()


def describe_tables(registry: SourceRegistry, deadline: float,
                    tables: list[tuple[DataSource, exp.Table]], run_jobs: RunJobs,
                    cache: LruCache[tuple[str, str], Described], ttl_s: float,
                    kept_ones: set[tuple[str, str]] | None = None
                    ) -> dict[tuple[str, str], Columns]:
    """The columns of each table (by ``describe_key``): those the process read less than
    ``ttl_s`` ago from the same source object from ``cache`` (their keys go in
    ``kept_ones``), the others asked of their sources, one query per source for all its
    tables, the sources at once. Files are read every time: their schema is on the disk,
    and replacing a file changes it."""
    found: dict[tuple[str, str], Columns] = {}
    wanted: dict[str, tuple[DataSource, list[exp.Table]]] = {}
    now = time.monotonic()
    for source, table in tables:
        key = describe_key(source, table)
        if key in found:
            continue
        kept = cache.get(key) if ttl_s > 0 and not files.is_file_source(source) else None
        if kept is not None and kept.source is source and now - kept.read_at < ttl_s:
            found[key] = kept.columns
            if kept_ones is not None:
                kept_ones.add(key)
        else:
            found[key] = []  # asked below, once
            wanted.setdefault(source.name.lower(), (source, []))[1].append(table)
    groups = list(wanted.values())
    answers = run_jobs([lambda child, s=source, t=listed: describe(
        registry, child, deadline, s, t) for source, listed in groups])
    for (source, listed), columns in zip(groups, answers, strict=True):
        for table, described in zip(listed, columns, strict=True):
            key = describe_key(source, table)
            found[key] = described
            if not files.is_file_source(source):
                cache.put(key, Described(source, now, described))
    return found


@dataclass(frozen=True)
class _KeptShape:
    source: DataSource
    read_at: float
    shape: Shape


class Shapes:
    """The shapes of legs' results (``stream.Shape``) the process keeps (``Engine.shapes``),
    by source and leg query, as it keeps tables' descriptions: valid while the source is
    the same object and for ``ttl_s`` after they were learnt. A leg read with a kept shape
    is not described by its source first; its key goes in ``kept``, so that a statement
    that then fails as a changed table would is run once more with nothing kept."""

    def __init__(self, cache: LruCache[tuple[str, str], Any], ttl_s: float,
                 kept: set[tuple[str, str]]) -> None:
        self._cache, self._ttl_s, self._kept = cache, ttl_s, kept

    @staticmethod
    def _key(leg: Leg) -> tuple[str, str]:
        return f"shape:{leg.source.name.lower()}", leg.sql

    def get(self, leg: Leg) -> Shape | None:
        if self._ttl_s <= 0:
            return None
        kept = self._cache.get(self._key(leg))
        if kept is None or kept.source is not leg.source or \
                time.monotonic() - kept.read_at >= self._ttl_s:
            return None
        self._kept.add(self._key(leg))
        return kept.shape

    def put(self, leg: Leg, shape: Shape) -> None:
        if self._ttl_s > 0:
            self._cache.put(self._key(leg), _KeptShape(leg.source, time.monotonic(), shape))

    def forget(self, leg: Leg) -> None:
        self._cache.pop(self._key(leg))


def forget_described(cache: LruCache[tuple[str, str], Described], leg: Leg) -> None:
    """Drop the descriptions of a leg's tables (its source failed it: a table or column
    that changed since it was described is read again by the next statement)."""
    for table, _ in leg.joined or [(leg.table, leg.alias)]:
        bare = table.copy()
        bare.set("alias", None)
        cache.pop(describe_key(leg.source, bare))


def describe(registry: SourceRegistry, statement: Statement, deadline: float,
             source: DataSource, tables: list[exp.Table]) -> list[Columns]:
    """The columns of each of ``tables`` with their kind of key ("int", "text", None),
    asked of their source with one query that reads no row (a missing table fails here, in
    the source's own words, before any leg runs): each table's columns follow a marker
    column of a name no table has."""
    if files.is_file_source(source):
        return [[(name, None) for name in files.describe(table)] for table in tables]
    glot = source.sqlglot_dialect
    if len(tables) == 1:
        marks: list[str] = []
        query = exp.select("*").from_(tables[0].copy()).limit(0)
    else:
        token = secrets.token_hex(8)
        marks = [f"quarry_{token}_{i}" for i in range(len(tables))]
        parts = [exp.select("*").from_(table.copy()).limit(0).subquery(f"quarry_t{i}")
                 for i, table in enumerate(tables)]
        query = exp.select(*[item for i in range(len(tables)) for item in (
            exp.alias_(exp.Literal.number(1), marks[i]),
            exp.Column(this=exp.Star(), table=exp.to_identifier(f"quarry_t{i}")))]
        ).from_(parts[0])
        for part in parts[1:]:
            query = query.join(part, join_type="cross")
    stream = _open(registry, statement, deadline, source, query.sql(dialect=glot), 1)
    try:
        for _ in stream.batches():  # none; read to the end so the connection is reused
            pass
        kinds = _KEY_KINDS.get(stream.dialect, {})
        types = stream.types or [None] * len(stream.columns)
        every = [(name, kinds.get(spec[0]) if spec else None)
                 for name, spec in zip(stream.columns, types, strict=True)]
    finally:
        stream.close()
    described: list[Columns] = [every] if not marks else []
    for name, kind in every if marks else ():
        if name in marks:
            described.append([])
        else:
            described[-1].append((name, kind))
    if source.dialect == "sqlite":
        declared = _sqlite_kinds(registry, statement, deadline, source,
                                 [table.name for table in tables if not table.db])
        described = [[(name, declared.get((table.name.lower(), name.lower())))
                      for name, _ in columns] if not table.db else columns
                     for table, columns in zip(tables, described, strict=True)]
    return described


def _sqlite_kinds(registry: SourceRegistry, statement: Statement, deadline: float,
                  source: DataSource, names: list[str]) -> dict[tuple[str, str], str]:
    """The key kinds of SQLite tables' columns (by lower-case table and column name) from
    the types their CREATE TABLE declares, by SQLite's own affinity rules: INTEGER affinity
    ("INT" in the type) holds integers, TEXT affinity ("CHAR", "CLOB", "TEXT") text; other
    columns (and views) take no filter, since SQLite compares them by other rules."""
    if not names:
        return {}
    wanted = sorted({name.lower() for name in names})
    sql = exp.select("name", "sql").from_("sqlite_master").where(
        exp.and_(exp.column("type").eq(exp.Literal.string("table")),
                 exp.func("lower", exp.column("name")).isin(
                     *[exp.Literal.string(name) for name in wanted])))
    stream = _open(registry, statement, deadline, source, sql.sql(dialect="sqlite"),
                   len(wanted))
    try:
        rows = [row for batch in stream.batches() for row in batch]
    finally:
        stream.close()
    found: dict[tuple[str, str], str] = {}
    for name, text in rows:
        if not text:
            continue
        try:
            create = sqlglot.parse_one(text, read="sqlite")
        except sqlglot.errors.SqlglotError:
            continue
        for column in create.find_all(exp.ColumnDef):
            declared = column.args.get("kind")
            kind = declared.sql(dialect="sqlite").upper() if declared is not None else ""
            if "INT" in kind:
                found[name.lower(), column.name.lower()] = "int"
            elif any(word in kind for word in ("CHAR", "CLOB", "TEXT")):
                found[name.lower(), column.name.lower()] = "text"
    return found


# Rows of a leg appended to its engine table at once (see ``load``).
APPEND_ROWS = 50_000


def load(registry: SourceRegistry, statement: Statement, deadline: float, leg: Leg,
         session: Session, max_rows: int, sql: str | None = None,
         expected_rows: int | None = None, shapes: Shapes | None = None) -> int:
    """Run ``leg`` and append its rows to the engine table ``leg.name``; its row count.
    ``sql``: the leg's query with a dynamic filter (the gate checks ``leg.sql``, the same
    query without it; both give rows of one shape); ``expected_rows``: its size as the
    plan knows it, if it does; ``shapes``: the leg results' shapes kept, and to keep."""
    if files.is_file_source(leg.source):
        return files.attach(leg, session)
    if leg.source.dialect == "sqlite" and sql is None:
        at_once = _sqlite_at_once(registry, statement, deadline, leg, session, max_rows,
                                  expected_rows)
        if at_once is not None:
            return at_once
    known = shapes.get(leg) if shapes is not None else None
    stream = _open(registry, statement, deadline, leg.source, leg.sql, max_rows, sql,
                   expected_rows, known)
    if shapes is not None and known is None and stream.shape is not None:
        shapes.put(leg, stream.shape)
    rows = 0
    try:
        kinds = [declared_type(stream.dialect, spec) for spec in stream.types] \
            or [None] * len(stream.columns)
        names = [c.lower() for c in stream.columns]
        json = _json_columns(stream)
        pending: list[Any] = []  # batches read and not yet in the engine
        waiting = 0

        def flush() -> None:
            nonlocal waiting
            if stream.native == "arrow":
                session.append(leg.name, pa.Table.from_batches(pending))
            else:  # rows typed by their values once, over all of them
                session.append(leg.name, record_batch(
                    [row for batch in pending for row in batch], names, kinds, json))
            pending.clear()
            waiting = 0

        for batch in stream.batches():
            if stream.native == "arrow" and stream.dialect == "postgresql":
                batch = _conform(batch, names, kinds)  # read by ADBC, every type declared
            elif stream.native == "arrow":  # read by connectorx, typed as the row path
                batch = batch.rename_columns(names)
            count = batch.num_rows if stream.native == "arrow" else len(batch)
            if not count:
                continue  # a native reader's last batch may be empty: nothing to append
            # Each append is a statement of the engine (a few ms): a leg's batches go in
            # together, APPEND_ROWS at a time, rather than as the stream's small batches.
            pending.append(batch)
            waiting += count
            rows += count
            leg.rows = rows
            if waiting >= APPEND_ROWS:
                flush()
        if pending:
            flush()
        if stream.truncated:
            raise SqlError(ErrorCode.TOO_MANY_ROWS,
                           f"The leg on {leg.label()} returns more than {max_rows} rows "
                           "(FEDERATION_MAX_LEG_ROWS); add a condition on that table")
        schema = pa.schema([json_field(n) if i in json else
                            pa.field(n, k if k is not None else pa.null())
                            for i, (n, k) in enumerate(zip(names, kinds, strict=True))])
        session.ensure(leg.name, schema)
    finally:
        stream.close()
    return rows


def _sqlite_at_once(registry: SourceRegistry, statement: Statement, deadline: float,
                    leg: Leg, session: Session, max_rows: int,
                    expected_rows: int | None) -> int | None:
    """A leg reading a whole SQLite table its plan sizes at most AT_ONCE_ROWS rows, of
    INTEGER and TEXT columns, read by connectorx at once (``sql/native_sqlite.py``): its
    rows, or None when it is not such a leg or that read declined it (then it is read as
    before). The leg passes the gate as every leg does."""
    from ..sql import native_sqlite  # connectorx loads with its first use

    if expected_rows is None or expected_rows > native_sqlite.AT_ONCE_ROWS or \
            not whole(leg) or leg.table.db:
        return None
    kinds = {column.lower(): leg.kinds.get(column) for column in leg.columns}
    if not kinds or any(kind not in ("int", "text") for kind in kinds.values()):
        return None
    gated = gate(leg.sql, registry, leg.source.name)
    if gated.param_names or (gated.source is not None and gated.source is not leg.source):
        return None
    statement.check()
    table = native_sqlite.read_at_once(leg.source.info.get("path"), gated.sql, kinds,
                                       min(2 * native_sqlite.AT_ONCE_ROWS, max_rows),
                                       current_app.config["SQL_MAX_RESPONSE_BYTES"])
    if table is None:
        return None
    statement.check()  # a cancel or the time limit that came during the read
    session.append(leg.name, table)
    leg.rows = table.num_rows
    return table.num_rows


def _json_columns(stream: Any) -> frozenset[int]:
    """The columns of a leg that are PostgreSQL json/jsonb: JSON in the engine, so that
    the answer gives their values as the one-source answer does (psycopg's objects), not
    their text. (MariaDB's JSON is text to its driver and in a one-source answer alike.)"""
    if stream.dialect != "postgresql" or not stream.types:
        return frozenset()
    return frozenset(i for i, spec in enumerate(stream.types)
                     if spec and spec[0] in (JSON, JSONB))


def record_batch(batch: list, names: list[str], kinds: list[pa.DataType | None],
                 json: Collection[int] = ()) -> pa.RecordBatch:
    """``json``: the columns whose values are JSON values (a dict, a list, a str …), which
    go to the engine as their JSON text in a field that the engine makes of its JSON
    type."""
    arrays, fields = [], []
    for i, (values, kind, name) in enumerate(zip(columns_of(batch, len(names)), kinds, names,
                                                 strict=True)):
        if i in json:  # each value as its JSON text (psycopg gives a jsonb string as a str)
            values, kind = [None if v is None else dumps_rows(v).decode() for v in values], \
                pa.string()
        elif kind is None:  # a type the driver does not declare (SQLite, MariaDB text)
            kind = pa.null() if all(v is None for v in values) else value_type(values)
        arrays.append(arrow_column(values, kind, name))
        fields.append(json_field(name) if i in json else pa.field(name, kind))
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _conform(batch: pa.RecordBatch, names: list[str], kinds: list[pa.DataType | None]
             ) -> pa.RecordBatch:
    from ..sql.native import conform  # loaded already: ADBC made this batch

    return conform(batch.rename_columns(names),
                   pa.schema([pa.field(n, k) for n, k in zip(names, kinds, strict=True)]))


def _open(registry: SourceRegistry, statement: Statement, deadline: float,
          source: DataSource, sql: str, max_rows: int, filtered: str | None = None,
          expected_rows: int | None = None, shape: Shape | None = None) -> Any:
    gated = gate(sql, registry, source.name)
    left = deadline - time.monotonic()
    if left <= 0:
        statement.stopped = statement.stopped or "time limit"
        raise statement.error()
    if filtered is not None and not gated.param_names:
        # The gated query and one more condition: a column compared with literals (the
        # keys, written by sqlglot); nothing in it that the gate did not check.
        return open_stream(gated.source or source, filtered, None, (),
                           timeout_s=left, max_rows=max_rows, statement=statement,
                           expected_rows=expected_rows, shape=shape)
    return open_stream(gated.source or source, gated.sql, None, gated.param_names,
                       timeout_s=left, max_rows=max_rows, statement=statement,
                       expected_rows=expected_rows, shape=shape)
