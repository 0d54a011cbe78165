"""The in-process DuckDB that joins the legs of federated statements.

One DuckDB database per process, built on first use and kept on ``app.extensions``: its
memory limit (FEDERATION_MEMORY) bounds what all the federated statements of the process
hold together, and beyond it DuckDB spills to FEDERATION_TEMP. Each statement works on a
connection of its own (``Session``) whose legs are TEMP tables, seen by no other
statement and dropped with the connection.

The engine never reaches anything but the rows Quarry hands it: external access (files,
URLs, extension downloads) is off, replacement scans of Python objects are off, and the
configuration is locked so that a statement cannot switch any of it back on.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from flask import Flask, current_app

from ..lru import LruCache
from ..sql.errors import ErrorCode, SqlError
from ..sql.files import files_dir
from ..sql.formats import pa  # pyarrow, imported with the first federated statement

EXTENSION_KEY = "quarry.federation"
_BATCH_VIEW = "quarry_batch"
# How a leg's Arrow field says that its text is JSON (Arrow's canonical JSON extension type,
# written as the field metadata it travels as, which pyarrow 18 can make too): DuckDB makes
# such a column of its JSON type, and a column of the answer that is still JSON goes back to
# the caller as the value it holds (``json_values``), as the one-source answer gives a
# PostgreSQL json/jsonb column or a knowledge base's metadata.
JSON_FIELD = {b"ARROW:extension:name": b"arrow.json", b"ARROW:extension:metadata": b""}


class EngineError(Exception):
    """A DuckDB error (the module loads late: callers catch this type, not DuckDB's)."""

    def __init__(self, original: Exception) -> None:
        super().__init__(str(original))
        self.original = original
        self.interrupted = type(original).__name__ == "InterruptException"


@contextmanager
def _engine_errors() -> Iterator[None]:
    import duckdb

    try:
        yield
    except duckdb.Error as exc:
        raise EngineError(exc) from None


# The rows each leg query (its shape: literals aside) sent when last read whole, for ordering
# dynamic filters (``dynamic.py``); the most recent SIZES_KEPT shapes.
Sizes = LruCache[str, int]
SIZES_KEPT = 4096
# Tables whose description (columns, key kinds) a process keeps (``legs.describe_tables``),
# and legs whose row estimate it keeps (``dynamic.estimate``): by (source, table or leg SQL).
DESCRIBED_KEPT = 1024
# Statements whose plan a process keeps (``plan.Planned``), by ``plan.plan_key``.
PLANS_KEPT = 256
# A leg's estimate: (the source object that gave it, when, rows).
Estimates = LruCache[tuple[str, str], tuple[Any, float, int]]


class Engine:
    """The process's DuckDB database (thread-safe: one connection per statement)."""

    def __init__(self, memory_bytes: int, temp_dir: str | None, threads: int,
                 files_dir: str | None = None) -> None:
        self.memory_bytes = memory_bytes
        self.temp_dir = temp_dir
        self.threads = threads
        self.files_dir = files_dir
        self.sizes: Sizes = LruCache(SIZES_KEPT)
        self.described: LruCache[tuple[str, str], Any] = LruCache(DESCRIBED_KEPT)
        self.estimates: Estimates = LruCache(DESCRIBED_KEPT)
        self.shapes: LruCache[tuple[str, str], Any] = LruCache(DESCRIBED_KEPT)
        self.plans: LruCache[tuple, Any] = LruCache(PLANS_KEPT)
        self._db: Any = None  # duckdb.DuckDBPyConnection
        self._lock = threading.Lock()

    def session(self) -> Session:
        with self._lock:
            if self._db is None:
                self._db = self._open()
            return Session(self._db.cursor())

    @property
    def is_open(self) -> bool:
        return self._db is not None

    def open(self) -> None:
        """Open the database now (a gunicorn worker whose master preloaded the engine's
        modules, at its start), so that no first statement pays for it."""
        with self._lock:
            if self._db is None:
                self._db = self._open()

    def _open(self) -> Any:
        # DuckDB loads with the first federated statement: ~55 MiB and a third of a second
        # that a worker serving one source at a time never pays (nor the gunicorn master).
        import duckdb

        config: dict[str, Any] = {
            "memory_limit": f"{max(self.memory_bytes // (1024 * 1024), 16)}MiB",
            "threads": self.threads,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "python_enable_replacements": False,
        }
        if self.temp_dir:
            os.makedirs(self.temp_dir, exist_ok=True)
            config["temp_directory"] = self.temp_dir
        db = duckdb.connect(":memory:", config=config)
        if self.files_dir:
            # The one folder the engine may read besides its own spill files: uploaded
            # files' Parquet, scanned by DuckDB's own reader (``files.py``). No statement
            # can name a path: table functions and writes are refused before the engine.
            os.makedirs(self.files_dir, exist_ok=True)
            folder = os.path.join(os.path.abspath(self.files_dir), "")
            db.execute(f"SET allowed_directories = [{_string(folder)}]")
        # Set after the paths above (a path is external access); then nothing may change.
        db.execute("SET enable_external_access = false")
        db.execute("SET lock_configuration = true")
        return db

    def warm(self) -> None:
        """Run in this process's engine one small statement of each kind a federated one
        runs: legs' rows into TEMP tables (integers, decimals, dates, text; created, then
        added to), their keys, a join with a filter, a group and an order, its answer read
        as Arrow. The first of each cost a worker's first federated statement 50-100 ms
        more than later ones (DuckDB's first allocations and code paths); a worker whose
        master preloaded the engine pays them at its start instead."""
        import datetime
        import decimal

        rows = pa.table({"k": pa.array([1, 2, 3], pa.int64()),
                         "d": pa.array([decimal.Decimal("1.50")] * 3, pa.decimal128(12, 2)),
                         "t": pa.array([datetime.date(2024, 1, 2)] * 3, pa.date32())})
        names = pa.table({"k": pa.array([1, 2], pa.int64()), "s": pa.array(["a", "b"])})
        session = self.session()
        try:
            session.append("quarry_warm_a", rows)
            session.append("quarry_warm_a", rows)
            session.append("quarry_warm_b", names)
            session.keys("quarry_warm_b", "k", 10)
            session.run("SELECT b.s, count(*) AS n, sum(a.d) AS total FROM quarry_warm_a AS a "
                        "JOIN quarry_warm_b AS b ON a.k = b.k WHERE a.t >= DATE '2024-01-01' "
                        "GROUP BY b.s ORDER BY b.s")
            for _ in session.batches():
                pass
        finally:
            session.close()

    def close(self) -> None:
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None


class Session:
    """One statement's connection: its leg tables, the engine query, the interrupt."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._tables: dict[str, pa.Schema] = {}
        self.json_columns: list[int] = []  # of the running statement's answer
        # Legs are fetched in parallel; one DuckDB connection takes one call at a time.
        self._lock = threading.Lock()

    def append(self, table: str, batch: pa.RecordBatch | pa.Table) -> None:
        """Add a batch of rows to leg table ``table`` (created by its first batch)."""
        if isinstance(batch, pa.RecordBatch):
            batch = pa.Table.from_batches([batch])
        with self._lock:
            self._append(table, batch)

    def _append(self, table: str, batch: pa.Table) -> None:
        schema = self._tables.get(table)
        if schema is None:
            self._with_batch(batch, f'CREATE TEMP TABLE "{table}" AS SELECT * FROM '
                                    f"{_BATCH_VIEW}")
            self._tables[table] = batch.schema
            return
        self._widen(table, schema, batch.schema)
        self._with_batch(batch, f'INSERT INTO "{table}" SELECT * FROM {_BATCH_VIEW}')

    def _with_batch(self, batch: pa.Table, sql: str) -> None:
        with _engine_errors():
            self.conn.register(_BATCH_VIEW, batch)
            try:
                self.conn.execute(sql)
            finally:
                self.conn.unregister(_BATCH_VIEW)

    def _widen(self, table: str, old: pa.Schema, new: pa.Schema) -> None:
        """A column typed by the values of an earlier batch (SQLite declares no types)
        that now holds other values: give it a type that holds both."""
        fields = list(old)
        changed = False
        for i, (was, now) in enumerate(zip(old, new, strict=True)):
            if was.type == now.type or pa.types.is_null(now.type):
                continue
            wider = _wider(was.type, now.type)
            if wider != was.type:
                with _engine_errors():
                    self.conn.execute(f'ALTER TABLE "{table}" ALTER "{was.name}" TYPE '
                                      f"{_duck_type(wider)}")
                fields[i] = pa.field(was.name, wider)
                changed = True
        if changed:
            self._tables[table] = pa.schema(fields)

    def ensure(self, table: str, schema: pa.Schema) -> None:
        """Create an empty leg table when its leg sent no row at all."""
        if table not in self._tables:  # no other thread writes this leg's table
            self.append(table, schema.empty_table())

    def keys(self, table: str, column: str, most: int, *, as_int: bool = False
             ) -> tuple[str, list | None, Any, Any] | None:
        """The distinct non-NULL values of ``column`` in leg table ``table`` (a dynamic
        filter's keys): (its kind, see ``key_kind``; the values or None beyond ``most``,
        min, max); None for a column of another type. ``as_int``: text keys as the engine
        compares them with an integer column, cast by DuckDB (text that is no integer is
        left out: it equals no integer)."""
        quoted = '"' + column.replace('"', '""') + '"'
        with self._lock, _engine_errors():
            appended = self._tables.get(table)
            at = appended.get_field_index(column) if appended is not None else -1
            if at >= 0:  # a leg's table: its type is the one its rows were appended with
                field_type = appended.field(at).type
            else:  # a file's view
                empty = self.conn.execute(f'SELECT {quoted} FROM "{table}" LIMIT 0')
                field_type = empty.to_arrow_table().schema.field(0).type
            kind = key_kind(field_type)
            if kind == "text" and as_int:
                kind, quoted = "int", f"TRY_CAST({quoted} AS BIGINT)"
            if kind is None:
                return None
            values = self.conn.execute(
                f'SELECT DISTINCT {quoted} FROM "{table}" WHERE {quoted} IS NOT NULL '
                f"LIMIT {int(most) + 1}").to_arrow_table().column(0).to_pylist()
            if len(values) <= most:
                return kind, values, None, None
            low, high = self.conn.execute(f'SELECT min({quoted}), max({quoted}) '
                                          f'FROM "{table}"').fetchone()
            return kind, None, low, high

    def distinct(self, table: str, column: str) -> int:
        """How many distinct non-NULL values ``column`` of leg table ``table`` holds."""
        quoted = '"' + column.replace('"', '""') + '"'
        with self._lock, _engine_errors():
            return self.conn.execute(f'SELECT count(DISTINCT {quoted}) FROM "{table}"'
                                     ).fetchone()[0]

    def attach(self, table: str, path: str, *, empty: bool = False) -> None:
        """Make ``table`` a view of the Parquet file ``path`` (a file leg,
        ``federation/files.py``) in the files folder: DuckDB scans it in place, reading only
        the columns and row groups the statement needs; ``empty``: none of its rows."""
        limit = " LIMIT 0" if empty else ""
        with self._lock, _engine_errors():
            self.conn.execute(f'CREATE TEMP VIEW "{table}" AS SELECT * FROM '
                              f"read_parquet({_string(path)}){limit}")

    def run(self, sql: str) -> list[str]:
        """Start the engine statement; its column names (read it with ``batches``, and
        its JSON columns' text as values with ``json_values``)."""
        with _engine_errors():
            self._result = self.conn.execute(sql)
            described = self._result.description or ()
            # DuckDB's Arrow answer has plain text for a JSON column (it writes the JSON
            # extension type only with arrow_lossless_conversion, which would change other
            # types too); its description still says JSON.
            self.json_columns = [i for i, d in enumerate(described) if str(d[1]) == "JSON"]
            return [d[0] for d in described]

    def batches(self, rows: int = 10_000) -> Iterator[pa.RecordBatch]:
        """The running statement's result, as record batches of about ``rows`` rows."""
        with _engine_errors():
            reader = self._result.to_arrow_reader(rows)
            while True:
                try:
                    batch = reader.read_next_batch()
                except StopIteration:
                    return
                yield batch

    def interrupt(self) -> None:
        self.conn.interrupt()

    def close(self) -> None:
        try:
            for table in self._tables:
                self.conn.execute(f'DROP TABLE IF EXISTS "{table}"')
        finally:
            self.conn.close()  # its TEMP views (file legs) go with it


def _string(text: str) -> str:
    """A DuckDB string literal of ``text`` (a path Quarry made, never a caller's text)."""
    return "'" + text.replace("'", "''") + "'"


def json_field(name: str) -> pa.Field:
    """A leg's column of JSON text, which the engine holds as its JSON type."""
    return pa.field(name, pa.string(), metadata=JSON_FIELD)


def json_values(values: list[Any]) -> list[Any]:
    """A JSON column's text (valid JSON: Quarry wrote the legs', DuckDB checks what it
    casts) as the objects, lists, numbers … it holds, read by ``json.loads`` as psycopg
    reads a one-source answer's json/jsonb (orjson, faster, would make an integer beyond
    64 bits a float); NULL stays None."""
    return [None if v is None else json.loads(v) for v in values]


def key_kind(kind: pa.DataType) -> str | None:
    """The kind of join key a column of this type holds ("int", "decimal", "date",
    "timestamp", "text"), None for a type no dynamic filter compares (floats, times with a
    zone …)."""
    if pa.types.is_integer(kind):
        return "int"
    if pa.types.is_decimal(kind):
        return "decimal"
    if pa.types.is_date(kind):
        return "date"
    if pa.types.is_timestamp(kind) and kind.tz is None:
        return "timestamp"
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return "text"
    return None


def _wider(was: pa.DataType, now: pa.DataType) -> pa.DataType:
    if pa.types.is_null(was):
        return now
    numbers = (pa.types.is_integer(was) or pa.types.is_floating(was)) and \
        (pa.types.is_integer(now) or pa.types.is_floating(now))
    if numbers:
        return pa.float64()
    return pa.string()


def _duck_type(kind: pa.DataType) -> str:
    if pa.types.is_floating(kind):
        return "DOUBLE"
    if pa.types.is_integer(kind):
        return "BIGINT"
    return "VARCHAR"


def engine_error(error: EngineError) -> SqlError:
    """DuckDB's own words for a failed engine statement (a type error, 1/0, a bad cast)."""
    exc = error.original
    kind = type(exc).__name__
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else kind
    if kind == "OutOfMemoryException":
        return SqlError(ErrorCode.RESPONSE_TOO_LARGE,
                        "The statement needs more memory than the federation engine's limit "
                        f"(FEDERATION_MEMORY) and could not spill to disk: {message}")
    if kind == "ParserException":
        return SqlError(ErrorCode.SYNTAX, f"The statement failed in the federation engine: "
                                          f"{message}")
    return SqlError(ErrorCode.QUERY_FAILED,
                    f"The statement failed in the federation engine: {message}")


def load_modules() -> None:
    """Import DuckDB, pyarrow and what DuckDB loads with the first rows it is handed (its
    Python binding imports pandas to check each object it scans: 1.5 s), in a gunicorn
    master that preloads the engine: its workers share the pages, and no first federated
    statement pays for them. The database used for it has no thread of its own (one
    thread: the caller's) and is closed before any fork."""
    import duckdb
    import pyarrow

    db = duckdb.connect(":memory:", config={"threads": 1})
    try:
        db.register("quarry_warm", pyarrow.table({"n": [1]}))
        db.execute("SELECT n FROM quarry_warm").to_arrow_table()
    finally:
        db.close()


def init_engine(app: Flask) -> None:
    temp = app.config.get("FEDERATION_TEMP") or os.path.join(app.instance_path,
                                                             "federation-spill")
    app.extensions[EXTENSION_KEY] = Engine(app.config["FEDERATION_MEMORY"], temp,
                                           app.config["FEDERATION_THREADS"], files_dir(app))


def current_engine() -> Engine:
    return current_app.extensions[EXTENSION_KEY]
