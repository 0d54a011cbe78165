"""Streamed results: a statement read batch by batch through a server-side cursor.

The buffered path (``execute.run_statement``) reads up to its row cap and answers at once.
A stream holds its pooled connection for as long as the client reads: PostgreSQL through a
named cursor in the same READ ONLY transaction, MariaDB through an unbuffered cursor,
SQLite by stepping the statement. One batch is in memory at a time, so a worker's memory
stays flat however many rows go out. The time limit covers the whole stream: each
database call keeps its own limit, the registry's watcher cancels a statement past its
deadline, and ``Statement.check`` stops between two batches.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from . import pgtypes
from .errors import SqlError, changed_shape
from .execute import (
    _abandon,
    _quietly,
    begin_mysql,
    begin_postgresql,
    bind_params,
    checkout,
    failure,
    reset_mysql_session,
)
from .roles import check_on_use
from .running import Statement, cancel_marked, cursor_name, marked
from .sources import DataSource

FIRST_BATCH_ROWS = 1000       # small: the first bytes leave quickly
MAX_BATCH_ROWS = 10_000       # as MindsDB's batches
# Rows per fetch of a CSV or Arrow stream read row by row. Its encoder makes several passes
# over a batch's Python objects (split into columns, check their types, convert them): a
# batch of 2 000 rows of a few columns (about half a MB of objects) is still in the CPU's
# cache for those passes, one of 10 000 is not, and each pass then waits on memory. Measured
# on SQLite (4 columns, in one process): Arrow 0.96 against 1.42 us a row, CSV 1.51 against
# 2.08 (fetch alone: 0.67 against 0.81).
COLUMNAR_BATCH_ROWS = 2000
COLUMNAR = ("csv", "arrow")
BATCH_BYTES = 1024 * 1024     # about this much text per batch


@dataclass
class Cursor:
    """What a dialect hands to TableStream: the result's columns and how to read it."""

    columns: list[str]
    fetch: Callable[[int], list]
    close: Callable[[bool], None]   # argument: whether every row was read
    # Per column, what the driver says of its type (dialect specific; for Arrow answers).
    types: list[Any] = field(default_factory=list)
    # "arrow": fetch gives record batches; "csv": chunks of CSV text (native.py); None: rows.
    native: str | None = None
    # A native CSV cursor: how many rows it has passed on so far.
    rows: Callable[[], int] | None = None
    # A native Arrow cursor: the Arrow types its reader reads each column as (MariaDB's),
    # and the schema of the record batches it read, before they were given those types.
    kinds: list[Any] | None = None
    read_schema: Callable[[], Any] | None = None


@dataclass(frozen=True)
class Shape:
    """What a native Arrow stream learnt of its result before its first row: the columns
    and types its source described, and the schema its reader then read. A caller that
    runs the same statement again gives it back (``open_stream(shape=)``): the source is
    not asked to describe the result again (a PostgreSQL DECLARE, a MariaDB LIMIT 0, one
    planning of the statement and two round trips each), and a first batch read otherwise
    than the shape says fails the stream as a changed table does."""

    columns: tuple[str, ...]
    types: tuple[Any, ...]
    kinds: tuple[Any, ...] | None
    schema: Any


class TableStream:
    """An open result, read with ``batches()``; always ``close()`` it (idempotent)."""

    def __init__(self, source: DataSource, conn: Any, cursor: Cursor, statement: Statement,
                 timeout_s: float, max_rows: int) -> None:
        self.source = source
        self.dialect = source.dialect
        self.columns = cursor.columns
        self.types = cursor.types
        self.native = cursor.native
        self.statement = statement
        self.truncated = False
        self.complete = False
        # What the answer's context says beside its database (a federated statement: the
        # engine that joined it, and why it is not the configured one).
        self.context: dict[str, str] = {}
        self._conn = conn
        self._cursor = cursor
        self._timeout_s = timeout_s
        self._max_rows = max_rows
        self._first: list | None = None
        self._closed = False
        self._batch_rows = COLUMNAR_BATCH_ROWS \
            if statement.response_format in COLUMNAR else MAX_BATCH_ROWS
        # A native Arrow stream's shape (``Shape``): given, or learnt from its first batch.
        self.shape: Shape | None = None

    def prefetch(self, shape: Shape | None = None) -> None:
        """Read the first batch now: most failures (1/0, a cancel, the time limit) come
        with it, and are then answered as a plain error instead of a cut stream.
        ``shape``: the one the stream was opened with, which its first batch must have."""
        self._first = self._fetch(FIRST_BATCH_ROWS)
        read = self._cursor.read_schema() if self._cursor.read_schema is not None and \
            self._first is not None else None
        if shape is not None:
            if read is not None and not read.equals(shape.schema):
                raise changed_shape(self.source.name)
            self.shape = shape
        elif read is not None:
            self.shape = Shape(tuple(self.columns), tuple(self.types),
                               tuple(self._cursor.kinds) if self._cursor.kinds else None,
                               read)

    def batches(self) -> Iterator[Any]:
        """Lists of row tuples, until the result or the row limit ends; raises SqlError.
        A native stream gives Arrow record batches or CSV chunks instead (``native``)."""
        if self.native is not None:
            yield from self._native_batches()
            return
        batch = self._first if self._first is not None else self._fetch(FIRST_BATCH_ROWS)
        self._first = None
        size, sent = FIRST_BATCH_ROWS, 0
        while batch:
            if self._max_rows and sent + len(batch) > self._max_rows:
                batch = batch[:self._max_rows - sent]
                self.truncated = True
            sent += len(batch)
            self.statement.rows_sent = sent
            if batch:
                yield batch
            if self.truncated:
                return
            self.statement.check()
            size = _next_size(batch, self._batch_rows)
            if self._max_rows:
                size = min(size, self._max_rows - sent + 1)  # one more tells if it is cut
            batch = self._fetch(size)
        self.complete = True

    def _native_batches(self) -> Iterator[Any]:
        unit = self._first if self._first is not None else self._fetch(0)
        self._first = None
        sent = 0
        while unit is not None:
            if self._cursor.rows is not None:  # CSV: COPY stops at the row limit (LIMIT)
                sent = max(self._cursor.rows(), 0)
            else:
                if self._max_rows and sent + unit.num_rows > self._max_rows:
                    unit = unit.slice(0, self._max_rows - sent)
                    self.truncated = True
                sent += unit.num_rows
            self.statement.rows_sent = sent
            yield unit
            if self.truncated:
                return
            self.statement.check()
            unit = self._fetch(0)
        self.complete = True

    def _fetch(self, size: int) -> Any:
        try:
            return self._cursor.fetch(size)
        except SqlError:
            raise
        except Exception as exc:
            raise failure(self.source, self._conn, exc, self._timeout_s,
                          self.statement) from None

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            self._cursor.close(self.complete)
        finally:
            self.statement.detach(self._conn)
            self._conn.close()


def _next_size(batch: list, most: int = MAX_BATCH_ROWS) -> int:
    """Rows in the next batch: about BATCH_BYTES of text, from a sample of this one, at
    most ``most``."""
    sample = batch[:100]
    width = sum([len(v) if v.__class__ is str or v.__class__ is bytes else 8
                 for row in sample for v in row]) / len(sample)
    return max(100, min(most, int(BATCH_BYTES / max(width + 4, 1))))


def open_stream(source: DataSource, sql: str, params: Mapping[str, Any] | None,
                param_names: Sequence[str], *, timeout_s: float, max_rows: int,
                statement: Statement, expected_rows: int | None = None,
                shape: Shape | None = None) -> TableStream:
    """Start the gated statement ``sql`` on ``source`` and read its first batch.
    ``expected_rows``: how many rows the caller's plan expects (a federated leg's size),
    when it knows: a MariaDB/MySQL result of few rows is read at once
    (``native_mysql.AT_ONCE_ROWS``). ``shape``: the ``TableStream.shape`` of an earlier
    Arrow stream of the same statement on the same source (see ``Shape``)."""
    bound = bind_params(params, param_names)
    conn = checkout(source)
    statement.deadline = time.monotonic() + timeout_s
    stream = None
    try:
        check_on_use(source, conn)  # as the buffered path: the account of a late source
        statement.attach(source, conn)
        arrow = statement.response_format == "arrow" and not bound
        if not arrow or source.dialect == "sqlite":
            shape = None
        if source.dialect == "postgresql" and shape is not None:
            cursor = _open_postgresql_arrow(conn, sql, list(shape.columns),
                                            list(shape.types), timeout_s, statement)
        elif source.dialect == "postgresql":
            cursor = _open_postgresql(conn, sql, bound, timeout_s, statement, max_rows)
        elif source.dialect == "sqlite":
            cursor = _open_sqlite(conn, sql, bound, timeout_s)
        else:
            cursor = None
            if arrow:
                cursor = _open_mysql_arrow(source, conn, sql, timeout_s, statement,
                                           expected_rows, shape)
            if cursor is None:
                cursor = _open_mysql(conn, sql, bound, timeout_s)
        stream = TableStream(source, conn, cursor, statement, timeout_s, max_rows)
        # A cancel that came while the stream was being opened (an ADBC session connects
        # first and starts its statement with the first fetch) found nothing to stop yet.
        statement.check()
        stream.prefetch(shape)
        return stream
    except BaseException as exc:
        error = exc if isinstance(exc, SqlError) or not isinstance(exc, Exception) else \
            failure(source, conn, exc, timeout_s, statement)
        if stream is not None:
            _quietly(stream.close)
        else:
            statement.detach(conn)
            conn.close()
        if error is exc:
            raise
        raise error from None


def _open_sqlite(conn: Any, sql: str, params: dict | None, timeout_s: float) -> Cursor:
    dbapi = conn.driver_connection
    deadline = time.monotonic() + timeout_s
    # The statement steps while rows are fetched: the limit covers the whole stream.
    dbapi.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
    try:
        cursor = dbapi.execute(sql, params or ())
    except BaseException:
        dbapi.set_progress_handler(None, 0)
        raise

    def close(_complete: bool) -> None:
        try:
            cursor.close()
        finally:
            dbapi.set_progress_handler(None, 0)

    return Cursor([d[0] for d in cursor.description or ()], cursor.fetchmany, close)


def _open_postgresql(conn: Any, sql: str, params: dict | None, timeout_s: float,
                     statement: Statement, max_rows: int) -> Cursor:
    pg = conn.driver_connection
    cursor = None
    try:
        begin_postgresql(pg, timeout_s, cursor=True)
        cursor = pg.cursor(name=cursor_name(conn, 0))
        cursor.execute(sql, params)  # DECLARE: the result's columns, nothing read yet
        description = cursor.description or ()
        columns = [d.name for d in description]
        types = [(d.type_code, d.precision, d.scale) for d in description]
        fmt = statement.response_format
        if fmt == "arrow" and pgtypes.arrow_eligible(types, params):
            cursor.close()
            pg.execute("ROLLBACK")  # the ADBC session reads; this one only waits
            return _open_postgresql_arrow(conn, sql, columns, types, timeout_s, statement)
        if fmt == "csv" and pgtypes.csv_eligible(types):
            cursor.close()
            return _open_postgresql_csv(conn, sql, params, columns, types, statement,
                                        max_rows)
    except BaseException:
        if cursor is not None:
            _quietly(cursor.close)
        if not pg.closed:
            _quietly(pg.execute, "ROLLBACK")
        raise

    def close(_complete: bool) -> None:
        try:
            _quietly(cursor.close)
        finally:
            if not pg.closed:
                _quietly(pg.execute, "ROLLBACK")

    return Cursor(columns, cursor.fetchmany, close, types)


def _open_postgresql_arrow(conn: Any, sql: str, columns: list[str], types: list[Any],
                           timeout_s: float, statement: Statement) -> Cursor:
    """Arrow record batches read by ADBC in a READ ONLY session of its own."""
    from . import native  # ADBC loads with the first native stream (native.py says why)

    reader = native.ArrowReader(conn.driver_connection, sql, cursor_name(conn, 0), timeout_s,
                                types)
    # A cancel (and the cancel of another process) now goes to the ADBC session.
    statement.reattach(reader.backend_id, reader.cancel)
    return Cursor(columns, reader.fetch, reader.close, types,
                  native="arrow", read_schema=reader.read_schema)


def _open_postgresql_csv(conn: Any, sql: str, params: dict | None, columns: list[str],
                         types: list[Any], statement: Statement, max_rows: int) -> Cursor:
    """CSV written by PostgreSQL (COPY … TO STDOUT) in the READ ONLY transaction."""
    from . import native  # as for Arrow: loaded by the first native stream

    pg = conn.driver_connection
    # The text of dates and floats as psycopg reads them in the row-by-row path.
    pg.execute("SET LOCAL DateStyle = 'ISO'; SET LOCAL extra_float_digits = 1")
    copy_cm = pg.cursor().copy(
        native.copy_statement(sql, columns, types, cursor_name(conn, 0), max_rows), params)
    copy = copy_cm.__enter__()
    reader = native.CsvReader(copy)

    def close(complete: bool) -> None:
        try:
            # Rows still coming: psycopg cancels the COPY and drains what is under way.
            cut = None if complete else _Abandoned()
            _quietly(copy_cm.__exit__, type(cut) if cut else None, cut, None)
        finally:
            if not pg.closed:
                _quietly(pg.execute, "ROLLBACK")

    return Cursor(columns, reader.fetch, close, types, native="csv",
                  rows=lambda: reader.rows)


class _Abandoned(Exception):
    """A COPY left before its end (the client went away, an error, the row limit)."""


def _open_mysql_arrow(source: DataSource, conn: Any, sql: str, timeout_s: float,
                      statement: Statement, expected_rows: int | None = None,
                      shape: Shape | None = None) -> Cursor | None:
    """Arrow record batches read by connectorx (``native_mysql.py``) when every column of
    the result is of a type it reads exactly; None otherwise (the row path reads it).

    The result's columns are asked first, on the pooled connection, in its READ ONLY
    transaction (the statement in a derived table, LIMIT 0: nothing is read); a statement
    that cannot stand there (two columns of one name) is left to the row path. With the
    ``shape`` of an earlier read of the statement, they are not asked again."""
    my = conn.driver_connection
    from . import native_mysql  # connectorx loads with its first stream (it says why)

    if shape is not None and shape.kinds is not None:
        names, types, kinds = list(shape.columns), list(shape.types), list(shape.kinds)
    else:
        described = _describe_mysql(conn, sql, timeout_s)
        if described is None:
            return None
        names, types, fields = described
        kinds = native_mysql.eligible(my, types, fields)
        if kinds is None:
            return None
    marker = f"quarry_{statement.id}"
    at_once = expected_rows is not None and expected_rows <= native_mysql.AT_ONCE_ROWS
    # A cancel finds the statement by its query id in the source's process list: from
    # before it starts, since a read at once runs it to its end in the reader's making.
    statement.reattach("", lambda: cancel_marked(source, marker))
    reader = native_mysql.ArrowReader(my, marked(conn, sql), names, kinds, timeout_s,
                                      "mariadb" in my.get_server_info().lower(),
                                      at_once=at_once,
                                      expected=(source.name, shape.schema) if shape else None)

    def close(complete: bool) -> None:
        try:
            if not complete:  # rows still coming: stop the statement, not read them all
                _quietly(cancel_marked, source, marker)
            reader.close()
        finally:
            reset_mysql_session(conn)

    return Cursor(names, reader.fetch, close, types, native="arrow", kinds=kinds,
                  read_schema=reader.read_schema)


def _describe_mysql(conn: Any, sql: str, timeout_s: float
                    ) -> tuple[list[str], list[Any], list[Any]] | None:
    """The columns of ``sql``'s result, their (type code, precision, scale) and PyMySQL's
    fields (their character sets), asked in the pooled connection's READ ONLY
    transaction; None when the statement cannot stand in a derived table."""
    import pymysql

    my = conn.driver_connection
    cursor = my.cursor()
    try:
        begin_mysql(conn, cursor, timeout_s)
        cursor.execute(marked(conn, f"SELECT * FROM (\n{sql}\n) AS quarry_columns LIMIT 0"))
        description = cursor.description or ()
        fields = list(getattr(getattr(cursor, "_result", None), "fields", None) or ())
    except pymysql.err.Error:
        return None  # the row path runs it, and says what fails
    finally:
        cursor.close()
        _quietly(my.rollback)
    return [d[0] for d in description], [(d[1], d[4], d[5]) for d in description], fields


def _open_mysql(conn: Any, sql: str, params: dict | None, timeout_s: float) -> Cursor:
    import pymysql.cursors

    my = conn.driver_connection
    cursor = my.cursor(pymysql.cursors.SSCursor)
    try:
        # The server gives up on a client that reads nothing for net_write_timeout (60 s
        # by default); a stream's reader may rightly pause longer between two batches (a
        # slow HTTP client, a knowledge base embedding a batch): the stream's time limit
        # bounds it instead.
        wait = max(60, math.ceil(timeout_s))
        if conn.info.get("quarry.net_write_timeout") != wait:
            cursor.execute(f"SET SESSION net_write_timeout = {wait}")
            conn.info["quarry.net_write_timeout"] = wait
        begin_mysql(conn, cursor, timeout_s)
        cursor.execute(marked(conn, sql), params)
    except BaseException:
        _quietly(my.rollback)
        raise

    def close(complete: bool) -> None:
        if complete:
            cursor.close()
            reset_mysql_session(conn)  # also rolls the transaction back
        else:  # rows still unread: draining them could take long
            _abandon(conn, cursor)

    description = cursor.description or ()
    return Cursor([d[0] for d in description], cursor.fetchmany, close,
                  [(d[1], d[4], d[5]) for d in description])
