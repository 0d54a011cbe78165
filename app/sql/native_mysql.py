"""MariaDB/MySQL streams read without Python rows: Arrow through connectorx.

PyMySQL turns every value of a result into a Python object, in Python: about 10 µs a
row of two columns, so a federated leg of 10 000 customers took 25-30 ms quiet (and 90 ms
on two busy cores, holding the interpreter's lock the other legs need). connectorx reads
the same result in Rust, into Arrow record batches, with the lock released.

It reads on a connection of its own, made with the pooled connection's parameters (host,
port, account, database), which the pooled connection stays checked out beside: a source
has at most twice its pool's connections. Before the statement, that connection is made
as safe as the pooled one: every transaction of the session READ ONLY, and the
statement's time limit (``max_statement_time`` on MariaDB, ``max_execution_time`` on
MySQL). The statement carries its query id in a comment, so a cancel finds it in the
process list (``running.cancel_marked``).

Only results whose every column it reads exactly take this path (``eligible``): integers,
floats, exact decimals of at most 28 digits and 10 decimal places (connectorx reads them
as ``decimal128(38, 10)``, then cast to the declared type without rounding), dates,
DATETIME, and text that is not binary. Anything else (binary strings, TIME, BIT,
TIMESTAMP, a source reached over TLS or a socket), keeps PyMySQL's path, so an answer has
the same values whichever path read it.

Loaded with the first such stream (connectorx's library is large); a gunicorn master that
preloads the federation engine loads it too when a MariaDB/MySQL source is configured.
"""

from __future__ import annotations

import re
import socket
import ssl
import threading
from typing import Any
from urllib.parse import quote

import connectorx
import pyarrow as pa
import pymysql

from .errors import ErrorCode, SqlError, changed_shape

# Rows per record batch read from the server.
BATCH_ROWS = 10_000
# A result expected to hold at most this many rows (a federated leg its plan sizes) is read
# by connectorx at once, into one Arrow table: that read leaves the interpreter's lock to
# the other threads, where its stream holds it while it connects, runs the statement and
# makes each batch, so that a PostgreSQL leg read beside it waited. The 2 %-selective join's
# legs (10 000 MariaDB customers, 21 204 PostgreSQL orders) read side by side in 7.4-8.5 ms
# at once, against 11.6-12.5 ms streamed (4.0-4.4 and 6.6-7.3 ms each alone).
AT_ONCE_ROWS = 50_000
# PyMySQL's FIELD_TYPE codes of the columns read here: integers (TINY, SHORT, LONG,
# LONGLONG, INT24, YEAR), FLOAT, DOUBLE, DATE, DATETIME, the decimals, and the text types
# (VARCHAR, BLOB/TEXT, VAR_STRING, STRING) when their character set is not binary.
_TYPES = {1: pa.int64(), 2: pa.int64(), 3: pa.int64(), 8: pa.int64(), 9: pa.int64(),
          13: pa.int64(), 4: pa.float32(), 5: pa.float64(), 10: pa.date32(),
          12: pa.timestamp("us")}
_DECIMAL = {0, 246}
_TEXT = {15, 252, 253, 254}
_BINARY_CHARSET = 63
_MOST_DIGITS, _MOST_PLACES = 28, 10
_ERROR = re.compile(r"ERROR (\d+) \(([0-9A-Z]+)\): (.*?)\s*\}?\s*$", re.DOTALL)


def _arrow_type(spec: tuple[int, Any, Any], charset: int | None) -> pa.DataType | None:
    """The Arrow type of a result column this module reads exactly (the row path's: those
    of ``formats.declared_type``, and text as the row path types it from its values); None
    for any other. ``spec``: the column's (type code, precision, scale) as PyMySQL describes it."""
    code, precision, places = spec
    if code in _TEXT:
        return pa.string() if charset is not None and charset != _BINARY_CHARSET else None
    if code in _DECIMAL:
        places = places or 0
        if not precision or places > _MOST_PLACES or \
                precision - places > _MOST_DIGITS - _MOST_PLACES:
            return None
        return pa.decimal128(precision, places)
    return _TYPES.get(code)


def eligible(conn: Any, types: list[tuple[int, Any, Any]], fields: list[Any]
             ) -> list[pa.DataType] | None:
    """The Arrow types of a result whose columns connectorx reads exactly, on a connection
    it can make as the pooled one ``conn`` (PyMySQL's) was made (TCP without TLS); None
    otherwise. ``types``: each column's (type code, precision, scale); ``fields``: PyMySQL's
    ``Field`` of each (their character sets)."""
    # PyMySQL tries TLS unless told otherwise: a session that got it (or that a socket
    # reaches) keeps PyMySQL, whose TLS options connectorx's URL cannot carry.
    sock = getattr(conn, "_sock", None)
    if conn.unix_socket or not isinstance(sock, socket.socket) or \
            isinstance(sock, ssl.SSLSocket) or not types or len(fields) != len(types):
        return None
    kinds = [_arrow_type(spec, getattr(field, "charsetnr", None))
             for spec, field in zip(types, fields, strict=True)]
    return None if any(kind is None for kind in kinds) else kinds


def _url(conn: Any) -> str:
    account = quote(conn.user.decode() if isinstance(conn.user, bytes) else conn.user, safe="")
    password = conn.password.decode() if isinstance(conn.password, bytes) else conn.password
    secret = f":{quote(password, safe='')}" if password else ""
    database = conn.db.decode() if isinstance(conn.db, bytes) else conn.db
    return f"mysql://{account}{secret}@{conn.host}:{conn.port}/{quote(database or '', safe='')}"


def driver_error(exc: BaseException) -> pymysql.err.MySQLError:
    """connectorx's error as PyMySQL raises it (its error code and the server's message),
    so that ``execute.failure`` answers it as the row path would."""
    match = _ERROR.search(str(exc))
    if match is None:  # no server error: the connection failed
        return pymysql.err.OperationalError(2013, str(exc).strip() or type(exc).__name__)
    return pymysql.err.OperationalError(int(match.group(1)), match.group(3))


def warm(conn: Any) -> None:
    """Read one row through connectorx from the server of the pooled connection ``conn``,
    as a leg would be read: a worker's first read sets up connectorx's own runtime (10-40
    ms), which its start pays instead of its first statement."""
    if eligible(conn, [(3, 1, 0)], [None]) is None:  # a connection it cannot make
        return
    reader = ArrowReader(conn, "SELECT 1", ["one"], [pa.int64()], 2.0,
                         "mariadb" in conn.get_server_info().lower())
    try:
        while reader.fetch() is not None:
            pass
    finally:
        reader.close()


class ArrowReader:
    """One statement read by connectorx; ``fetch()`` gives its next record batch, with the
    columns' declared types and names."""

    def __init__(self, conn: Any, sql: str, names: list[str], kinds: list[pa.DataType],
                 timeout_s: float, mariadb: bool, *, at_once: bool = False,
                 expected: tuple[str, pa.Schema] | None = None) -> None:
        """``at_once``: read the result whole, into one table (see AT_ONCE_ROWS), when it
        holds at most twice AT_ONCE_ROWS rows; a larger one (the plan's size was wrong) is
        read again as a stream, so that memory stays bounded. ``expected``: the name of
        the source, and the schema connectorx read the statement as before
        (``stream.Shape``): a first batch of another fails as a changed table does,
        before its values are given the kept types."""
        self._names, self._kinds, self._expected = names, kinds, expected
        self._read: pa.Schema | None = None  # of the batches connectorx made
        self._lock = threading.Lock()
        limit = f"SET SESSION max_statement_time = {max(timeout_s, 0.001):.3f}" if mariadb \
            else f"SET SESSION max_execution_time = {max(1, int(timeout_s * 1000))}"
        setup = ["SET SESSION TRANSACTION READ ONLY", limit]
        self._batches: Any = None
        self._reader: Any = None
        try:
            if at_once:
                most = AT_ONCE_ROWS * 2
                table = connectorx.read_sql(
                    _url(conn), f"SELECT * FROM (\n{sql}\n) AS quarry_whole LIMIT {most + 1}",
                    return_type="arrow", pre_execution_query=setup)
                if table.num_rows <= most:
                    self._batches = iter(table.to_batches(max_chunksize=BATCH_ROWS))
                    return
                del table
            self._reader = connectorx.read_sql(
                _url(conn), sql, return_type="arrow_stream", batch_size=BATCH_ROWS,
                pre_execution_query=setup)
        except BaseException as exc:  # pyo3's panics are BaseException, not Exception
            raise driver_error(exc) from None

    def fetch(self, _size: int = 0) -> pa.RecordBatch | None:
        try:
            if self._batches is not None:
                batch = next(self._batches)
            else:
                batch = self._reader.read_next_batch()
        except StopIteration:
            return None
        except BaseException as exc:  # noqa: BLE001 - as above
            raise driver_error(exc) from None
        if self._read is None:
            self._read = batch.schema
            if self._expected is not None and not batch.schema.equals(self._expected[1]):
                raise changed_shape(self._expected[0])
        return conform(batch, self._names, self._kinds)

    def read_schema(self) -> pa.Schema | None:
        """The schema of the record batches connectorx made, before they were given the
        declared types; None before the first."""
        return self._read

    def close(self, _complete: bool = True) -> None:
        with self._lock:
            reader, self._reader = self._reader, None
            self._batches = None
        if reader is not None:
            try:
                reader.close()
            except BaseException:  # noqa: BLE001, S110 - its connection may be gone
                pass


def conform(batch: pa.RecordBatch, names: list[str], kinds: list[pa.DataType]
            ) -> pa.RecordBatch:
    """connectorx's batch with the row path's types (int64, the declared decimals)."""
    columns = []
    for column, kind, name in zip(batch.columns, kinds, names, strict=True):
        if isinstance(column.type, pa.ExtensionType):
            column = column.storage
        if column.type != kind:
            try:
                column = column.cast(kind)  # safe: an inexact cast fails
            except (pa.ArrowException, ValueError) as exc:
                raise SqlError(ErrorCode.OUT_OF_RANGE, f"A value of column '{name}' is "
                                                       f"beyond {kind}: {exc}") from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, names=names)
