"""Read-only execution on one data source, per dialect, with a time limit and a row cap.

Layers after the parser gate (``gate.py``):
- SQLite: opened ``mode=ro`` with an authorizer that allows reads and listed functions only;
  the time limit is a progress handler that interrupts the statement inside SQLite.
- PostgreSQL: every statement runs in ``BEGIN TRANSACTION READ ONLY`` that is always rolled
  back, with ``SET LOCAL statement_timeout`` so the server itself cancels it. The statement
  is wrapped in ``LIMIT cap + 1`` and run as a plain (unnamed) statement whose rows arrive
  in chunks (``capped_sql``, ``_run_postgresql`` say why not in a server-side cursor).
- MySQL/MariaDB: ``START TRANSACTION READ ONLY``, always rolled back, with
  ``max_statement_time`` (MariaDB) / ``max_execution_time`` (MySQL) set on the session;
  rows stream through an unbuffered cursor; the session is reset after every request.
"""

from __future__ import annotations

import itertools
import sqlite3
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlglot import exp

from .errors import ErrorCode, NativeError, SqlError
from .gate import gate, parse_single
from .roles import check_on_use
from .running import Statement, marked
from .sources import DataSource, SourceRegistry, current_sources

# Rows per chunk of a buffered PostgreSQL answer (libpq's chunked rows mode). The byte
# budget is checked after each chunk, so at most this many rows overshoot it, as the
# second batch of the server-side cursor this replaced did. Measured on 100 000 rows x 4
# columns: chunks of 1 000 read as fast as one fetchall, chunks of 1 three times slower.
PG_CHUNK_ROWS = 1000


@dataclass
class QueryResult:
    columns: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool


def effective_timeout(source: DataSource, requested: float | None) -> float:
    """The source's limit; a request may lower it, never raise it."""
    if requested is not None and 0 < requested < source.timeout_s:
        return float(requested)
    return source.timeout_s


# How each database is asked for its plan of a statement without running it (SQLite's
# plain EXPLAIN lists its bytecode; EXPLAIN QUERY PLAN is the plan).
_PLAN_PREFIX = {"sqlite": "EXPLAIN QUERY PLAN ", "postgresql": "EXPLAIN ", "mysql": "EXPLAIN "}


def run_statement(source: DataSource, sql: str, params: Mapping[str, Any] | None,
                  param_names: Sequence[str], *, timeout_s: float, max_rows: int,
                  max_bytes: int | None = None,
                  statement: Statement | None = None, plan: bool = False) -> QueryResult:
    """Run one gated statement on ``source``; raises SqlError.

    ``max_bytes`` caps the text and bytes read (the response size limit); None: no cap.
    ``statement``, when given, can cancel the statement from another thread while it runs.
    ``plan``: answer the database's own plan of the statement (EXPLAIN without ANALYZE, on
    the same read-only connection), not its rows.
    """
    bound = bind_params(params, param_names)
    if plan:
        sql = _PLAN_PREFIX[source.dialect] + sql
    conn = _checkout(source)
    try:
        check_on_use(source, conn)  # a source that was down at start: its account, now
        if statement is not None:
            statement.attach(source, conn)
        if source.dialect == "postgresql":  # a plan cannot be wrapped in a capped SELECT
            return _run_postgresql(conn, sql, bound, timeout_s, max_rows, max_bytes,
                                   capped=not plan)
        runner = {"sqlite": _run_sqlite, "mysql": _run_mysql}[source.dialect]
        return runner(conn, sql, bound, timeout_s, max_rows, max_bytes)
    except SqlError:
        raise
    except Exception as exc:
        raise failure(source, conn, exc, timeout_s, statement) from None
    finally:
        if statement is not None:
            statement.detach(conn)
        conn.close()


def bind_params(params: Mapping[str, Any] | None, param_names: Sequence[str]) -> dict | None:
    """The values of the statement's placeholders, in order; MISSING_PARAMETER if one lacks."""
    params = dict(params or {})
    missing = [n for n in dict.fromkeys(param_names) if n not in params]
    if missing:
        raise SqlError(ErrorCode.MISSING_PARAMETER,
                       "No value for parameter " + ", ".join(f":{n}" for n in missing)
                       + " in params")
    return {n: params[n] for n in param_names} if param_names else None


def failure(source: DataSource, conn: Any, exc: BaseException, timeout_s: float,
            statement: Statement | None = None) -> SqlError:
    """The SqlError for a driver error; a broken connection is dropped from the pool."""
    error = _translate(source, exc, timeout_s)
    if error.code == ErrorCode.SOURCE_DOWN:
        if conn.is_valid:
            conn.invalidate()  # a broken connection must not go back to the pool
    elif statement is not None and error.code in (ErrorCode.TIME_LIMIT, ErrorCode.QUERY_FAILED) \
            and statement.was_stopped():
        # The database reports a cancel like its own time limit: say who stopped it.
        error = statement.error(timeout_s)
    return error


def reset_mysql_session(conn: Any) -> None:
    """After a stream, as after a buffered statement (see ``_reset_mysql_session``)."""
    if conn.is_valid:
        _reset_mysql_session(conn)


def checkout(source: DataSource) -> Any:
    """A pooled connection of ``source``; BUSY or SOURCE_DOWN when there is none."""
    return _checkout(source)


def open_connections(source: DataSource, *, arrow: bool) -> None:
    """Open a pooled connection of ``source`` and leave it idle in the pool; with ``arrow``,
    also an ADBC session to a PostgreSQL source's server (``native.py``), which its Arrow
    streams (a federated statement's legs) take, or a first read through connectorx from a
    MariaDB/MySQL one (``native_mysql.py``) or an SQLite file (``native_sqlite.py``)."""
    conn = checkout(source)
    try:
        if arrow and source.dialect == "postgresql":
            from . import native  # ADBC loads with its first use (native.py says why)

            native.open_session(conn.driver_connection)
        elif arrow and source.dialect == "mysql":
            from . import native_mysql  # as ADBC: loaded with its first use

            native_mysql.warm(conn.driver_connection)
        elif arrow and source.dialect == "sqlite":
            from . import native_sqlite  # connectorx, as for MariaDB

            native_sqlite.warm(source.info.get("path"))
    finally:
        conn.close()


def begin_postgresql(pg: Any, timeout_s: float, *, cursor: bool = False) -> None:
    """Open the READ ONLY transaction every PostgreSQL statement runs in.

    ``cursor``: the statement will be read through a server-side cursor (a stream).
    """
    ms = max(1, int(timeout_s * 1000))
    # The gate checked sqlglot's reading of the text, which is the standard one: with
    # standard_conforming_strings off (a role's or server's setting) PostgreSQL would
    # read 'a\'' , f() --' as a string *and a call* the gate never saw.
    # A cursor is planned for its first 10 % of rows by default (a fast start, a slower
    # whole); a stream is read to its end (or its cap), so it is planned for all of them.
    fraction = "; SET LOCAL cursor_tuple_fraction = 1" if cursor else ""
    pg.execute(f"BEGIN TRANSACTION READ ONLY; SET LOCAL statement_timeout = {ms}; "
               f"SET LOCAL standard_conforming_strings = on{fraction}")


def begin_mysql(conn: Any, cursor: Any, timeout_s: float) -> None:
    """Set the session's time limit (when it changed) and open a READ ONLY transaction."""
    my = conn.driver_connection
    if conn.info.get("quarry.timeout_s") != timeout_s:
        if "mariadb" in my.get_server_info().lower():
            # In seconds; 0 would mean no limit at all, so never round below 1 ms.
            cursor.execute(f"SET SESSION max_statement_time = {max(timeout_s, 0.001):.3f}")
        else:
            cursor.execute(f"SET SESSION max_execution_time = {max(1, int(timeout_s * 1000))}")
        conn.info["quarry.timeout_s"] = timeout_s
    cursor.execute("START TRANSACTION READ ONLY")


def _checkout(source: DataSource) -> Any:
    try:
        return source.connect()
    except sa_exc.TimeoutError:
        what = f"Data source '{source.name}'" if source.name else \
            "The engine for statements without a table"
        raise SqlError(ErrorCode.BUSY,
                       f"{what} is busy: no free connection; try again shortly") from None
    except Exception as exc:
        raise SqlError(ErrorCode.SOURCE_DOWN,
                       f"Data source '{source.name}' cannot be reached: "
                       f"{_driver_message(exc)}") from None


def _run_sqlite(conn: Any, sql: str, params: dict | None, timeout_s: float,
                max_rows: int, max_bytes: int | None) -> QueryResult:
    dbapi: sqlite3.Connection = conn.driver_connection
    deadline = time.monotonic() + timeout_s
    # Called every N virtual-machine steps; a non-zero answer interrupts the statement.
    dbapi.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
    try:
        cursor = dbapi.execute(sql, params or ())
        columns = [d[0] for d in cursor.description or ()]
        rows = _fetch(cursor, max_rows, max_bytes)
        cursor.close()
    finally:
        dbapi.set_progress_handler(None, 0)
    return _result(columns, rows, max_rows)


def capped_sql(sql: str, max_rows: int) -> str:
    """``sql`` bounded to ``max_rows + 1`` rows (one more tells that the cap cut it).

    A wrapper rather than an edit of the statement's own LIMIT: it is right whatever the
    statement ends with (LIMIT, OFFSET, FETCH, a parameter, UNION, ORDER BY, whose order
    the outer LIMIT keeps), and the planner still sees the bound: a sort under it becomes
    a top-N sort. The gate wrote ``sql`` without comments, and the newline ends any that a
    future rendering might leave, so the closing parenthesis is never commented out.
    PostgreSQL only: MariaDB refuses a derived table with two columns of one name.
    """
    return f"SELECT * FROM (\n{sql}\n) AS quarry_capped LIMIT {max(max_rows + 1, 0)}"


def _run_postgresql(conn: Any, sql: str, params: dict | None, timeout_s: float,
                    max_rows: int, max_bytes: int | None, *, capped: bool = True
                    ) -> QueryResult:
    """A plain statement, planned as PostgreSQL plans any query, not in a cursor.

    PostgreSQL plans a server-side cursor for its first 10 % of rows
    (``cursor_tuple_fraction``) and never runs it with parallel workers: TPC-H Q10 took
    1.3-2.5x as long in one as in a plain statement (bench/tpch.py). Memory stays bounded
    without a cursor: the statement is wrapped in ``LIMIT cap + 1``, and its rows come in
    chunks of PG_CHUNK_ROWS (``stream``), each counted against the byte budget before the
    next is read; over the budget, psycopg cancels the statement and drains what is under
    way.
    The statement text starts with its query id, so that ``running.cancel_backend`` finds
    it in pg_stat_activity as it found the cursor named after it.
    """
    pg = conn.driver_connection
    # No ROLLBACK at the end: the connection goes back to the pool right after
    # (run_statement), whose reset rolls the transaction back in one round trip with
    # DISCARD ALL (sources.py) instead of one each.
    begin_postgresql(pg, timeout_s)
    cursor = pg.cursor()
    chunks = cursor.stream(marked(conn, capped_sql(sql, max_rows) if capped else sql),
                           params, size=PG_CHUNK_ROWS)
    try:
        rows = _fetch(_Rows(chunks), max_rows, max_bytes)
        for _ in chunks:  # the end of the result (LIMIT: no row is left)
            pass
        if cursor.description is None and capped:
            # No row came, and psycopg describes a streamed result from its first
            # chunk: ask for the columns alone (LIMIT 0 runs nothing).
            cursor.execute(marked(conn, capped_sql(sql, -1)), params)
        columns = [d.name for d in cursor.description or ()]
    finally:
        chunks.close()  # rows still coming (over the byte budget): cancel, drain
        cursor.close()
    return _result(columns, rows, max_rows)


class _Rows:
    """The ``fetchmany`` of ``_fetch`` over an iterator of rows."""

    def __init__(self, rows: Any) -> None:
        self._rows = rows

    def fetchmany(self, size: int) -> list:
        return list(itertools.islice(self._rows, size))


def _run_mysql(conn: Any, sql: str, params: dict | None, timeout_s: float,
               max_rows: int, max_bytes: int | None) -> QueryResult:
    try:
        return _run_mysql_statement(conn, sql, params, timeout_s, max_rows, max_bytes)
    finally:
        if conn.is_valid:  # not dropped already (a truncated stream, a broken connection)
            _reset_mysql_session(conn)


def _run_mysql_statement(conn: Any, sql: str, params: dict | None, timeout_s: float,
                         max_rows: int, max_bytes: int | None) -> QueryResult:
    import pymysql.cursors

    my = conn.driver_connection
    mariadb = "mariadb" in my.get_server_info().lower()
    cursor = my.cursor(pymysql.cursors.SSCursor)
    begin_mysql(conn, cursor, timeout_s)
    started = time.monotonic()
    try:
        cursor.execute(marked(conn, sql), params)
        columns = [d[0] for d in cursor.description or ()]
        rows = list(_fetch(cursor, max_rows, max_bytes))
    except SqlError:  # over the byte budget, with rows still unread
        _abandon(conn, cursor)
        raise
    except Exception:
        _quietly(my.rollback)
        raise
    elapsed = time.monotonic() - started
    if len(rows) > max_rows:
        _abandon(conn, cursor)
        # The connection is gone, so the server cannot be asked whether it cut the
        # statement (see below): rows that took the whole limit to come are not trusted.
        if elapsed >= timeout_s:
            raise _CutByTimeLimit
        return _result(columns, rows, max_rows)
    cursor.close()
    if mariadb:
        cut = elapsed >= 0.9 * timeout_s and _mariadb_cut_statement(my)
    else:  # MySQL cannot be asked: a statement that took the whole limit is not trusted
        cut = elapsed >= timeout_s
    if cut:
        raise _CutByTimeLimit
    # No ROLLBACK of its own: the session reset that follows rolls the transaction back.
    return _result(columns, rows, max_rows)


def _mariadb_cut_statement(my: Any) -> bool:
    """Whether MariaDB's max_statement_time stopped the last statement without an error.

    Most statements fail with error 1969 when the limit strikes. A few do not: BENCHMARK()
    checks the kill flag, stops its loop and returns 0, and a statement without a table
    loop to notice the flag afterwards then ends as a success (``SELECT
    BENCHMARK(2e9, MD5('x'))`` answered ``[[0]]``). The server still counts the statement
    in the session's Max_statement_time_exceeded, which the reset after each request puts
    back to 0 (``_reset_mysql_session``): any count at all means this statement was cut.
    Asked only when the statement took about the whole limit, so fast queries pay nothing.
    """
    cursor = my.cursor()
    try:
        cursor.execute("SHOW SESSION STATUS LIKE 'Max_statement_time_exceeded'")
        row = cursor.fetchone()
    finally:
        cursor.close()
    return bool(row) and int(row[1]) > 0


class _CutByTimeLimit(Exception):
    """The server stopped the statement at its time limit but did not say so."""


# COM_RESET_CONNECTION (MariaDB >= 10.2.4, MySQL >= 5.7.3); PyMySQL has no method for it.
_COM_RESET_CONNECTION = 0x1F


def _reset_mysql_session(conn: Any) -> None:
    """Put a MariaDB/MySQL connection back as it was right after connecting.

    No session state may outlive a request on a pooled connection: a user lock taken by a
    function, a user variable, a temporary table, a prepared statement, a changed setting,
    the counters the next caller could read (FOUND_ROWS). COM_RESET_CONNECTION drops all of
    them in one round trip and keeps the connection (a fresh connection per request would
    cost a TCP and authentication handshake each time). It also resets every session
    variable to the server's default, so the settings PyMySQL made when it connected are
    made again, and the time limit is set again on the next use. If the reset fails the
    connection is dropped instead: it never goes back to the pool with its state.
    """
    my = conn.driver_connection
    try:
        my._execute_command(_COM_RESET_CONNECTION, b"")
        my._read_ok_packet()
        conn.info.pop("quarry.timeout_s", None)
        # What pymysql.Connection.connect() does after the handshake.
        my.set_character_set(my.charset, my.collation)
        if my.sql_mode is not None:
            with my.cursor() as cursor:
                cursor.execute("SET sql_mode=%s", (my.sql_mode,))
        if my.init_command is not None:
            with my.cursor() as cursor:
                cursor.execute(my.init_command)
        my.autocommit(my.autocommit_mode)
    except Exception:  # noqa: BLE001 - whatever went wrong, the session cannot be trusted
        conn.invalidate()


def _abandon(conn: Any, cursor: Any) -> None:
    """Drop a MySQL connection with an unbuffered result still unread.

    Draining the rest could take long: the server ends the statement when the client goes
    away. PyMySQL's result and cursor finalisers would try to drain the closed socket:
    disarm them.
    """
    if getattr(cursor, "_result", None) is not None:
        cursor._result.unbuffered_active = False
    cursor.connection = None
    conn.invalidate()


def _quietly(fn: Any, *args: Any) -> None:
    """Clean-up that must not hide the error being reported (the connection may be gone)."""
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - the original error is the one that matters
        pass


def _fetch(cursor: Any, max_rows: int, max_bytes: int | None) -> list:
    """Up to ``max_rows + 1`` rows, in growing batches, within a byte budget.

    The response size cap is enforced while the rows arrive, not after they are all in
    memory: ``SELECT repeat('x', 1e6) FROM generate_series(1, 1e5)`` stops after a few
    batches. Strings and bytes are counted (numbers and dates are small and bounded).
    """
    rows: list = []
    batch, spent = 100, 0
    while len(rows) <= max_rows:
        chunk = cursor.fetchmany(min(batch, max_rows + 1 - len(rows)))
        if not chunk:
            break
        rows.extend(chunk)
        if max_bytes is not None:
            spent += sum([len(v) for row in chunk for v in row
                          if v.__class__ is str or v.__class__ is bytes])
            if spent > max_bytes:
                raise SqlError(ErrorCode.RESPONSE_TOO_LARGE,
                               f"The result is larger than the limit of {max_bytes} bytes; "
                               "select fewer rows or columns")
        batch = min(batch * 10, 10_000)
    return rows


def _result(columns: list[str], rows: list, max_rows: int) -> QueryResult:
    truncated = len(rows) > max_rows
    return QueryResult(columns, rows[:max_rows] if truncated else rows, truncated)


def _driver_message(exc: BaseException) -> str:
    """The driver's own message, without SQLAlchemy's [SQL: …] boilerplate."""
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    diag = getattr(exc, "diag", None)
    if diag is not None and getattr(diag, "message_primary", None):
        return diag.message_primary
    args = getattr(exc, "args", ())
    if len(args) == 2 and isinstance(args[0], int):  # PyMySQL: (errno, message)
        return str(args[1])
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


_PG_CODES = {"57014": ErrorCode.TIME_LIMIT, "25006": ErrorCode.READ_ONLY,
             "42501": ErrorCode.PERMISSION_DENIED, "42P01": ErrorCode.UNKNOWN_TABLE,
             "42601": ErrorCode.SYNTAX, "3F000": ErrorCode.UNKNOWN_TABLE,
             "22003": ErrorCode.OUT_OF_RANGE}
_MYSQL_CODES = {1969: ErrorCode.TIME_LIMIT, 3024: ErrorCode.TIME_LIMIT,
                1317: ErrorCode.TIME_LIMIT, 1792: ErrorCode.READ_ONLY,
                1146: ErrorCode.UNKNOWN_TABLE, 1049: ErrorCode.UNKNOWN_TABLE,
                1064: ErrorCode.SYNTAX, 1142: ErrorCode.PERMISSION_DENIED,
                1143: ErrorCode.PERMISSION_DENIED, 1044: ErrorCode.PERMISSION_DENIED,
                1045: ErrorCode.PERMISSION_DENIED, 1227: ErrorCode.PERMISSION_DENIED,
                1370: ErrorCode.PERMISSION_DENIED, 2003: ErrorCode.SOURCE_DOWN,
                2006: ErrorCode.SOURCE_DOWN, 2013: ErrorCode.SOURCE_DOWN,
                1264: ErrorCode.OUT_OF_RANGE, 1690: ErrorCode.OUT_OF_RANGE}


def _classify(exc: BaseException) -> ErrorCode:
    if isinstance(exc, _CutByTimeLimit):
        return ErrorCode.TIME_LIMIT
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    module = type(exc).__module__
    sqlstate = getattr(exc, "sqlstate", None) \
        if module.startswith("psycopg") or isinstance(exc, NativeError) else None
    if sqlstate:
        if sqlstate in _PG_CODES:
            return _PG_CODES[sqlstate]
        if sqlstate.startswith("08"):
            return ErrorCode.SOURCE_DOWN
        return ErrorCode.QUERY_FAILED
    if isinstance(exc, NativeError):
        return ErrorCode.QUERY_FAILED
    if module.startswith("psycopg"):
        # No SQLSTATE: either the connection failed, or psycopg itself refused a value on
        # the client side (a NUL in a text parameter, a value it cannot convert).
        import psycopg

        if isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
            return ErrorCode.SOURCE_DOWN
        return ErrorCode.QUERY_FAILED
    args = getattr(exc, "args", ())
    if module.startswith("pymysql"):
        if args and isinstance(args[0], int):
            return _MYSQL_CODES.get(args[0], ErrorCode.QUERY_FAILED)
        return ErrorCode.SOURCE_DOWN
    if isinstance(exc, sqlite3.Error):
        return _classify_sqlite(exc)
    if isinstance(exc, OSError | ConnectionError):
        return ErrorCode.SOURCE_DOWN
    if isinstance(exc, OverflowError):  # sqlite3: a parameter beyond 64-bit integers
        return ErrorCode.OUT_OF_RANGE
    return ErrorCode.QUERY_FAILED


# SQLite's primary result codes (the low byte of ``sqlite_errorcode``, extended codes too).
_SQLITE_CODES = {sqlite3.SQLITE_INTERRUPT: ErrorCode.TIME_LIMIT,  # the progress handler
                 sqlite3.SQLITE_AUTH: ErrorCode.READ_ONLY,        # the authorizer refused
                 sqlite3.SQLITE_READONLY: ErrorCode.READ_ONLY,
                 sqlite3.SQLITE_CANTOPEN: ErrorCode.SOURCE_DOWN}
# SQLITE_ERROR covers compile and arithmetic errors alike; only its text tells these apart
# (a function the authorizer denies is SQLITE_ERROR too, unlike a denied read: SQLITE_AUTH).
_SQLITE_ERROR_TEXTS = (("no such table", ErrorCode.UNKNOWN_TABLE),
                       ("syntax error", ErrorCode.SYNTAX),
                       ("not authorized to use function", ErrorCode.READ_ONLY),
                       ("integer overflow", ErrorCode.OUT_OF_RANGE))


def _classify_sqlite(exc: sqlite3.Error) -> ErrorCode:
    primary = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if primary in _SQLITE_CODES:
        return _SQLITE_CODES[primary]
    if primary == sqlite3.SQLITE_ERROR:
        text = str(exc).lower()
        for needle, code in _SQLITE_ERROR_TEXTS:
            if needle in text:
                return code
    return ErrorCode.QUERY_FAILED


def _where(source: DataSource) -> str:
    """Where a statement ran, for a message. A statement that names no table runs on no data
    source (an in-memory SQLite whose name is empty): say that, not "data source ''"."""
    return f"on data source '{source.name}'" if source.name else "without a data source"


# Said after the driver's message when a statement named no table (SELECT nosuch).
_NO_TABLE_HINT = (" (the statement names no table; to read one, write FROM <source>.<table> "
                  "or set context.db to a data source)")


def _translate(source: DataSource, exc: BaseException, timeout_s: float) -> SqlError:
    code = _classify(exc)
    message = _driver_message(exc)
    where = _where(source)
    if code == ErrorCode.TIME_LIMIT:
        return SqlError(code, f"The statement {where} was cancelled: "
                              f"it ran past the time limit of {timeout_s:g} s")
    if code == ErrorCode.SOURCE_DOWN:
        return SqlError(code, f"Data source '{source.name}' cannot be reached: {message}")
    if code == ErrorCode.READ_ONLY:
        return SqlError(code, f"The statement is refused {where}: it is read-only "
                              f"({message})")
    if code == ErrorCode.OUT_OF_RANGE:
        if isinstance(exc, OverflowError):
            message = "an integer parameter is beyond 64 bits"
        return SqlError(code, f"A number is too large {where}: {message}")
    hint = "" if source.name else _NO_TABLE_HINT
    return SqlError(code, f"The statement failed {where}: {message}{hint}")


def fetch_rows(source: str, select_sql: str, *, max_rows: int, timeout_s: float | None = None,
               registry: SourceRegistry | None = None) -> tuple[list[str], list[tuple]]:
    """Run one read-only SELECT on data source ``source`` through the gate and the limits.

    Bare table names resolve in ``source``. Raises SqlError, also TOO_MANY_ROWS when the
    query returns more than ``max_rows`` rows. ``registry`` defaults to the current app's
    (pass ``current_app.extensions["quarry.sources"]`` when running outside a request).
    """
    registry = registry or current_sources()
    data_source = registry.require(source)
    gated = gate(select_sql, registry, data_source.name)
    target = gated.source or data_source
    result = run_statement(target, gated.sql, None, gated.param_names,
                           timeout_s=effective_timeout(target, timeout_s), max_rows=max_rows)
    if result.truncated:
        raise SqlError(ErrorCode.TOO_MANY_ROWS,
                       f"The query returns more than {max_rows} rows; narrow it down "
                       f"(WHERE, LIMIT)")
    return result.columns, [tuple(r) for r in result.rows]


def query_columns(source: str | None, select_sql: str, *, registry: SourceRegistry,
                  timeout_s: float | None = None, allow_constant: bool = False) -> list[str]:
    """The names of the columns ``select_sql`` returns on data source ``source``, without
    reading its rows; raises SqlError as running it would (gate, grants, unknown table or
    column …).

    The gated statement is run on the read-only path with ``LIMIT 0`` (``zero_rows``): the
    database plans it and describes the result, and stops before the first row
    (PostgreSQL's Limit node, MariaDB's "zero limit" and SQLite's limit counter all skip
    the scan), so a query over millions of rows answers at once. ``allow_constant``: a
    statement that names no table (``SELECT 1 AS x``) is described too, else refused.
    """
    data_source = registry.require(source) if source is not None else None
    gated = gate(select_sql, registry, data_source.name if data_source else None)
    target = gated.source or data_source or (registry.constants if allow_constant else None)
    if target is None:
        raise SqlError(ErrorCode.UNKNOWN_TABLE, "The query names no data source")
    bind_params(None, gated.param_names)  # a :name has no value here: MISSING_PARAMETER
    probe = gate(zero_rows(gated.sql, target.sqlglot_dialect), registry,
                 target.name or None)
    result = run_statement(probe.source or target, probe.sql, None, probe.param_names,
                           timeout_s=effective_timeout(target, timeout_s), max_rows=0)
    return result.columns


def zero_rows(sql: str, dialect: str) -> str:
    """``sql`` (one statement the gate wrote) asking for no row: its own LIMIT set to 0.

    On the statement itself, not on a derived table around it: MariaDB refuses a derived
    table with two columns of one name (``SELECT a.id, b.id …``), which is a fine answer
    to describe. A statement without a LIMIT clause of its own (VALUES) is wrapped instead;
    the gate's rendering has no comment to close the parenthesis early.
    """
    tree = parse_single(sql, dialect)
    while isinstance(tree, exp.Subquery) and not tree.alias and \
            isinstance(tree.this, exp.Select | exp.SetOperation | exp.Subquery):
        tree = tree.this
    if isinstance(tree, exp.Select | exp.SetOperation):
        tree.set("limit", exp.Limit(expression=exp.Literal.number(0)))
        return tree.sql(dialect=dialect, comments=False)
    return f"SELECT * FROM (\n{sql}\n) AS quarry_columns LIMIT 0"
