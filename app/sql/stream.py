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

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import SqlError
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
from .running import Statement, cursor_name, mysql_marked
from .sources import DataSource

FIRST_BATCH_ROWS = 1000       # small: the first bytes leave quickly
MAX_BATCH_ROWS = 10_000       # as MindsDB's batches
BATCH_BYTES = 1024 * 1024     # about this much text per batch


@dataclass
class Cursor:
    """What a dialect hands to TableStream: the result's columns and how to read it."""

    columns: list[str]
    fetch: Callable[[int], list]
    close: Callable[[bool], None]   # argument: whether every row was read
    # Per column, what the driver says of its type (dialect specific; for Arrow answers).
    types: list[Any] = field(default_factory=list)


class TableStream:
    """An open result, read with ``batches()``; always ``close()`` it (idempotent)."""

    def __init__(self, source: DataSource, conn: Any, cursor: Cursor, statement: Statement,
                 timeout_s: float, max_rows: int) -> None:
        self.source = source
        self.dialect = source.dialect
        self.columns = cursor.columns
        self.types = cursor.types
        self.statement = statement
        self.truncated = False
        self.complete = False
        self._conn = conn
        self._cursor = cursor
        self._timeout_s = timeout_s
        self._max_rows = max_rows
        self._first: list | None = None
        self._closed = False

    def prefetch(self) -> None:
        """Read the first batch now: most failures (1/0, a cancel, the time limit) come
        with it, and are then answered as a plain error instead of a cut stream."""
        self._first = self._fetch(FIRST_BATCH_ROWS)

    def batches(self) -> Iterator[list]:
        """Lists of row tuples, until the result or the row limit ends; raises SqlError."""
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
            size = _next_size(batch)
            if self._max_rows:
                size = min(size, self._max_rows - sent + 1)  # one more tells if it is cut
            batch = self._fetch(size)
        self.complete = True

    def _fetch(self, size: int) -> list:
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


def _next_size(batch: list) -> int:
    """Rows in the next batch: about BATCH_BYTES of text, from a sample of this one."""
    sample = batch[:100]
    width = sum([len(v) if v.__class__ is str or v.__class__ is bytes else 8
                 for row in sample for v in row]) / len(sample)
    return max(100, min(MAX_BATCH_ROWS, int(BATCH_BYTES / max(width + 4, 1))))


def open_stream(source: DataSource, sql: str, params: Mapping[str, Any] | None,
                param_names: Sequence[str], *, timeout_s: float, max_rows: int,
                statement: Statement) -> TableStream:
    """Start the gated statement ``sql`` on ``source`` and read its first batch."""
    bound = bind_params(params, param_names)
    conn = checkout(source)
    statement.deadline = time.monotonic() + timeout_s
    stream = None
    try:
        check_on_use(source, conn)  # as the buffered path: the account of a late source
        statement.attach(source, conn)
        opener = {"sqlite": _open_sqlite, "postgresql": _open_postgresql,
                  "mysql": _open_mysql}[source.dialect]
        stream = TableStream(source, conn, opener(conn, sql, bound, timeout_s), statement,
                             timeout_s, max_rows)
        stream.prefetch()
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


def _open_postgresql(conn: Any, sql: str, params: dict | None, timeout_s: float) -> Cursor:
    pg = conn.driver_connection
    cursor = None
    try:
        begin_postgresql(pg, timeout_s)
        cursor = pg.cursor(name=cursor_name(conn, 0))
        cursor.execute(sql, params)
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

    description = cursor.description or ()
    return Cursor([d.name for d in description], cursor.fetchmany, close,
                  [(d.type_code, d.precision, d.scale) for d in description])


def _open_mysql(conn: Any, sql: str, params: dict | None, timeout_s: float) -> Cursor:
    import pymysql.cursors

    my = conn.driver_connection
    cursor = my.cursor(pymysql.cursors.SSCursor)
    try:
        begin_mysql(conn, cursor, timeout_s)
        cursor.execute(mysql_marked(conn, sql), params)
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
