"""PostgreSQL streams read without Python rows: Arrow through ADBC, CSV through COPY.

The row-by-row path (``stream.py``) turns every value into a Python object and back, which
caps a stream near the driver's fetch rate. For the two formats whose bytes PostgreSQL (or
Arrow's C++ driver) can produce directly, a stream of the usual column types skips that:

- ``arrow``: ADBC's PostgreSQL driver (Apache Arrow's) reads the result with ``COPY …
  (FORMAT binary)`` into Arrow record batches, in C++. It reads in a session of its own,
  made with the pooled connection's own parameters, whose every transaction is READ ONLY
  (``default_transaction_read_only``); each statement runs in a transaction that sets its
  time limit (``SET LOCAL statement_timeout``) and is rolled back: the whole stream is one
  statement. Those sessions are kept per process and reused (``_Sessions``), as the data
  path's own connections are: the driver reads the type catalogue whenever it connects.
- ``csv``: ``COPY (SELECT …) TO STDOUT (FORMAT csv, HEADER)`` on the pooled connection,
  inside the same READ ONLY transaction as every statement. Each column is written by
  PostgreSQL as the row-by-row CSV writes the Python value (``formats.csv_stream``):
  ``true``/``false``, ISO timestamps, Python's float notation, NULL and '' alike; the lines
  end in CRLF (RFC 4180). One difference remains: for a few doubles past 1e16 PostgreSQL
  writes 17 digits where Python writes 16; both read back as the same double.

Both run the statement the gate let through, unchanged, as a subquery. Columns of other
types (intervals, JSON, arrays, …) and statements with parameters (Arrow) keep the
row-by-row path, so every answer has the same values whichever path made it.

This module loads ADBC (and its driver library): it is imported by the stream that uses it,
not at start-up, so a server process that never streams Arrow or CSV from PostgreSQL does
not carry it. Which results may take these paths is ``pgtypes.py``'s to say.
"""

from __future__ import annotations

import os
import threading
import time
from typing import Any

import adbc_driver_postgresql.dbapi as adbc_pg
import pyarrow as pa
from psycopg.conninfo import make_conninfo

from .errors import ErrorCode, NativeError, SqlError
from .pgtypes import BOOL, FLOAT8, NUMERIC, TEXTUAL, TIMESTAMP, TIMESTAMPTZ

# About this many bytes per Arrow record batch (ADBC's default is 16 MB): a batch is built,
# written and dropped before the next, so this bounds the stream's memory.
ARROW_BATCH_BYTES = 4 * 1024 * 1024
# CSV chunks handed to the HTTP server: PostgreSQL sends one message per row.
CSV_CHUNK_BYTES = 1024 * 1024


_MESSAGE_STATES = (("canceling statement due to", "57014"),
                   ("in a read-only transaction", "25006"),
                   ("permission denied", "42501"))


def native_error(exc: BaseException) -> NativeError:
    """ADBC's error as PostgreSQL's: its SQLSTATE, and the server's message alone. Errors
    raised while batches are read come as pyarrow's OSError, with the message only."""
    text = str(exc)
    sqlstate = getattr(exc, "sqlstate", None)
    message = text.split("ERROR:", 1)[1] if "ERROR:" in text else text
    message = message.split("\nQuery was:", 1)[0].split(". SQLSTATE:", 1)[0].strip()
    message = message.splitlines()[0].strip() if message else type(exc).__name__
    if not sqlstate:
        sqlstate = next((state for needle, state in _MESSAGE_STATES if needle in message),
                        None)
    return NativeError(sqlstate, message)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------------- Arrow


class _Session:
    """An ADBC connection to PostgreSQL, with its backend pid and when it was last put back."""

    __slots__ = ("conn", "backend_id", "idle_since")

    def __init__(self, conn: Any, backend_id: str) -> None:
        self.conn = conn
        self.backend_id = backend_id
        self.idle_since = 0.0


class _Sessions:
    """The idle ADBC sessions of this process, by connection string.

    Opening one costs far more than a statement: the driver reads PostgreSQL's type catalogue
    (all of ``pg_type`` and ``pg_attribute``) when it connects, 15-100 ms by itself; a
    federated statement opens one per PostgreSQL leg. A session is put back only after a
    statement read to its end and a ROLLBACK that succeeded; one that was cancelled or failed
    is closed. Each statement runs in a transaction of its own that is rolled back, so what a
    statement SETs (``statement_timeout`` is SET LOCAL per statement) does not outlive it; the
    READ ONLY default is the session's own, given when it connects. A session idle for longer
    than ``IDLE_S`` is closed instead of reused (the server may have dropped it).
    """

    PER_KEY = 4
    KEYS = 16
    IDLE_S = 60.0

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: dict[str, list[_Session]] = {}
        self._pid = os.getpid()

    def take(self, key: str) -> _Session | None:
        stale: list[_Session] = []
        found = None
        now = time.monotonic()
        with self._lock:
            if self._pid != os.getpid():  # a forked child: the parent's sockets are not ours
                self._idle, self._pid = {}, os.getpid()
            sessions = self._idle.get(key, [])
            while sessions:
                session = sessions.pop()
                if now - session.idle_since <= self.IDLE_S:
                    found = session
                    break
                stale.append(session)
        for session in stale:
            _close_quietly(session.conn)
        return found

    def give(self, key: str, session: _Session) -> None:
        session.idle_since = time.monotonic()
        dropped: list[_Session] = []
        with self._lock:
            if self._pid != os.getpid():
                dropped.append(session)
            else:
                sessions = self._idle.setdefault(key, [])
                if len(sessions) < self.PER_KEY:
                    sessions.append(session)
                else:
                    dropped.append(session)
                while len(self._idle) > self.KEYS:  # the oldest connection strings first
                    dropped.extend(self._idle.pop(next(iter(self._idle))))
        for extra in dropped:
            _close_quietly(extra.conn)


def _close_quietly(conn: Any) -> None:
    try:
        conn.close()
    except Exception:  # noqa: BLE001, S110 - closing a session that may be gone
        pass


_SESSIONS = _Sessions()


def _connect(conninfo: str) -> _Session:
    try:
        conn = adbc_pg.connect(conninfo, autocommit=False)
    except Exception as exc:
        error = native_error(exc)
        error.sqlstate = error.sqlstate or "08006"  # no session: the source is down
        raise error from None
    try:
        with conn.cursor() as cursor:
            cursor.execute("SELECT pg_backend_pid()")
            backend_id = str(cursor.fetchone()[0])
        conn.rollback()
    except Exception as exc:
        _close_quietly(conn)
        raise native_error(exc) from None
    return _Session(conn, backend_id)


def _conninfo(pg: Any) -> str:
    """The connection string of ADBC sessions to the server of the psycopg connection ``pg``
    (its parameters, every transaction READ ONLY); the key of their idle ones."""
    params = pg.info.get_parameters()
    if pg.info.password:
        params["password"] = pg.info.password
    options = " ".join(filter(None, [
        params.pop("options", ""), "-c default_transaction_read_only=on",
        "-c standard_conforming_strings=on"]))
    return make_conninfo("", **params, options=options)


def open_session(pg: Any) -> None:
    """Open an ADBC session to the server of ``pg`` and keep it idle, unless one is idle
    already: the first Arrow stream of a worker then does not read the type catalogue."""
    key = _conninfo(pg)
    session = _SESSIONS.take(key)
    _SESSIONS.give(key, session if session is not None else _connect(key))


def numeric_as_text(sql: str, types: list[Any]) -> str:
    """``sql`` with its numeric columns written as text by PostgreSQL: the driver turns
    numeric's binary digits into text itself, which took half of a leg of 20 000 rows of
    three columns (numeric(12, 2) among them); PostgreSQL's own text is read as any text,
    and cast to the column's decimal as the driver's was (``conform``)."""
    if not any(spec[0] == NUMERIC for spec in types):
        return sql
    names = [f"c{i}" for i in range(len(types))]
    columns = ", ".join(f"q.{name}::text" if spec[0] == NUMERIC else f"q.{name}"
                        for name, spec in zip(names, types, strict=True))
    # The statement on lines of its own: a trailing -- comment cannot reach the wrapper.
    return f"SELECT {columns} FROM (\n{sql}\n) AS q({', '.join(names)})"


class ArrowReader:
    """An ADBC session running one statement; ``fetch()`` gives its next record batch."""

    def __init__(self, pg: Any, sql: str, marker: str, timeout_s: float,
                 types: list[Any] | None = None) -> None:
        self._key = _conninfo(pg)
        self._lock = threading.Lock()
        self._closed = False
        self._reusable = False  # set once the statement has been read to its end
        self._cursor: Any = None
        self._reader: Any = None
        # The query id in the text: another process finds the session by it.
        self._marker = f"/* {marker} */\n{numeric_as_text(sql, types or [])}\n"
        ms = max(1, int(timeout_s * 1000))
        session = _SESSIONS.take(self._key)
        if session is not None:
            try:
                self._prepare(session, ms)
            except Exception:  # noqa: BLE001 - a pooled session the server has dropped
                _close_quietly(session.conn)
                session = None
        if session is None:
            session = _connect(self._key)
            try:
                self._prepare(session, ms)
            except Exception as exc:
                _close_quietly(session.conn)
                raise native_error(exc) from None
        self._session = session
        self._conn = session.conn
        self.backend_id = session.backend_id

    def _prepare(self, session: _Session, ms: int) -> None:
        cursor = session.conn.cursor()
        try:
            # In the transaction the driver opened (autocommit off): gone with its ROLLBACK.
            cursor.execute(f"SET LOCAL statement_timeout = {int(ms)}")
            cursor.adbc_statement.set_options(
                **{"adbc.postgresql.batch_size_hint_bytes": str(ARROW_BATCH_BYTES)})
        except BaseException:
            _close_quietly(cursor)
            raise
        self._cursor = cursor

    def start(self) -> None:
        try:
            self._cursor.execute(self._marker)
            self._reader = self._cursor.fetch_record_batch()
        except Exception as exc:
            raise native_error(exc) from None

    def cancel(self) -> None:
        with self._lock:
            if not self._closed and self._cursor is not None:
                self._cursor.adbc_cancel()

    def read_schema(self) -> pa.Schema | None:
        """The schema of the record batches ADBC reads (numeric as text); None before
        the statement started."""
        return self._reader.schema if self._reader is not None else None

    def fetch(self, _size: int = 0) -> pa.RecordBatch | None:
        if self._reader is None:
            self.start()
        try:
            return self._reader.read_next_batch()
        except StopIteration:
            with self._lock:
                self._reusable = not self._closed
            return None
        except Exception as exc:
            raise native_error(exc) from None

    def close(self, complete: bool = True) -> None:
        if not complete and self._reader is not None:
            try:  # rows still coming: stop the COPY rather than read it to its end
                self.cancel()
            except Exception:  # noqa: BLE001, S110 - it may have just ended
                pass
        with self._lock:
            if self._closed:
                return
            self._closed = True
            reusable = complete and self._reusable
        for step in (getattr(self._reader, "close", None),
                     getattr(self._cursor, "close", None)):
            if step is not None:
                try:
                    step()
                except Exception:  # noqa: BLE001 - closing a session that may be gone
                    reusable = False
        try:
            self._conn.rollback()
        except Exception:  # noqa: BLE001 - the session is gone or in no state to reuse
            reusable = False
        if reusable:
            _SESSIONS.give(self._key, self._session)
        else:
            _close_quietly(self._conn)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch with the stream's declared types (numeric arrives as its text)."""
    if batch.schema.equals(schema):
        return batch
    columns = []
    for column, field in zip(batch.columns, schema, strict=True):
        if isinstance(column.type, pa.ExtensionType):
            column = column.storage
        if column.type != field.type:
            try:
                column = column.cast(field.type)
            except (pa.ArrowException, ValueError) as exc:
                raise SqlError(ErrorCode.QUERY_FAILED,
                               f"Column '{field.name}' has a value that is not {field.type} "
                               f"({exc}); CAST the column in the statement to one type"
                               ) from None
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# ----------------------------------------------------------------------------------- CSV


def _float_text(col: str) -> str:
    """PostgreSQL's float text made Python's (``repr``): 'nan', 'inf', '1.0', and fixed
    notation up to 1e16 (PostgreSQL switches to an exponent at 1e15). Both write the
    shortest digits that read back to the same double (``extra_float_digits`` 1)."""
    x = col
    t = f"{x}::text"
    return (f"CASE WHEN {x} = 'NaN'::float8 THEN 'nan' "
            f"WHEN {x} = 'Infinity'::float8 THEN 'inf' "
            f"WHEN {x} = '-Infinity'::float8 THEN '-inf' "
            f"WHEN abs({x}) >= 1e15 AND abs({x}) < 1e16 THEN "
            f"  CASE WHEN ({t})::numeric::text LIKE '%.%' THEN ({t})::numeric::text "
            f"  ELSE ({t})::numeric::text || '.0' END "
            f"WHEN {t} ~ '^-?[0-9]+$' THEN {t} || '.0' "
            f"ELSE {t} END")


def _timestamp_text(col: str, zoned: bool) -> str:
    """datetime.isoformat(): 'T', microseconds only when there are some, '+HH:MM'. Values
    Python cannot hold (infinity, BC, after 9999) keep PostgreSQL's text, as psycopg
    hands them over."""
    zone = f" || to_char({col}, 'TZH:TZM')" if zoned else ""
    return (f"CASE WHEN extract(year FROM {col}) BETWEEN 1 AND 9999 THEN "
            f"to_char({col}, 'YYYY-MM-DD\"T\"HH24:MI:SS') || "
            f"CASE WHEN extract(microseconds FROM {col})::bigint % 1000000 = 0 THEN '' "
            f"ELSE to_char({col}, '.US') END{zone} ELSE {col}::text END")


def _csv_expression(col: str, code: int, single: bool) -> str:
    if code == FLOAT8:
        expr = _float_text(col)
    elif code == BOOL:
        expr = f"CASE WHEN {col} THEN 'true' WHEN NOT {col} THEN 'false' END"
    elif code in (TIMESTAMP, TIMESTAMPTZ):
        expr = _timestamp_text(col, code == TIMESTAMPTZ)
    elif code in TEXTUAL and not single:
        # Python's csv module writes NULL and '' alike: unquoted nothing.
        return f"NULLIF({col}, '')"
    else:
        expr = col
    if single:
        # ... and a row of one empty field as "" (PostgreSQL would write an empty line).
        return f"COALESCE(({expr})::text, '')"
    return expr


def copy_statement(sql: str, columns: list[str], types: list[Any], alias: str,
                   max_rows: int) -> str:
    """The COPY that writes ``sql``'s rows as the row-by-row CSV would."""
    single = len(columns) == 1
    names = [f"c{i}" for i in range(len(columns))]
    select = ", ".join(f"{_csv_expression(n, spec[0], single)} AS {quote_ident(col)}"
                       for n, spec, col in zip(names, types, columns, strict=True))
    limit = f" LIMIT {int(max_rows)}" if max_rows else ""
    # The statement on lines of its own: a trailing -- comment cannot reach the wrapper.
    return (f"COPY (SELECT {select} FROM (\n{sql}\n) AS {quote_ident(alias)}"
            f"({', '.join(names)}){limit}) TO STDOUT (FORMAT csv, HEADER)")


class CsvReader:
    """Chunks of RFC 4180 CSV from a COPY in progress; counts the rows it passes on."""

    def __init__(self, copy: Any) -> None:
        self._copy = copy
        self._inside = False  # within a quoted field at the end of the last chunk
        self.rows = -1        # the header line is not a row

    def fetch(self, _size: int = 0) -> bytes | None:
        parts, size = [], 0
        read = self._copy.read
        while size < CSV_CHUNK_BYTES:
            data = read()
            if not data:
                break
            parts.append(bytes(data))
            size += len(data)
        if not parts:
            return None
        return self._crlf(b"".join(parts))

    def _crlf(self, data: bytes) -> bytes:
        """PostgreSQL ends a line with LF; RFC 4180 with CRLF. A line break inside a quoted
        field is data and stays as it is (as Python's csv module writes it)."""
        if b'"' not in data and not self._inside:
            self.rows += data.count(b"\n")
            return data.replace(b"\n", b"\r\n")
        pieces = data.split(b'"')  # "" inside a field toggles twice: parity still holds
        for i in range(1 if self._inside else 0, len(pieces), 2):
            if b"\n" in pieces[i]:
                self.rows += pieces[i].count(b"\n")
                pieces[i] = pieces[i].replace(b"\n", b"\r\n")
        if len(pieces) % 2 == 0:
            self._inside = not self._inside
        return b'"'.join(pieces)

