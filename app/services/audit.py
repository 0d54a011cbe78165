"""The audit log: every change (with before and after, secrets masked) and every SQL statement.

A change's record is added to the session of the change itself, before the service commits:
the two land together or not at all. A statement's record has no change to travel with (a
read changes nothing in the store), so it is written by itself, after the statement ran and
before its answer is sent: one INSERT on a connection of its own, committed at once (on
PostgreSQL a single autocommit statement, one round trip). An answer the client has seen is
therefore in the log already, and stays there when the worker is killed the moment after.
When the record cannot be written (the store is down), the statement is answered with 503
instead of its result: nothing is answered unaudited.

A streamed answer is recorded before its first byte, with the outcome ``streaming`` and no
row count; when the stream ends, the same record is updated with the rows that went out, the
time to the last byte and ``ok`` or ``error``. A record left ``streaming`` is a stream whose
worker died before its end.

The same write keeps each user's statement history (``console_history``, what the console
lists): a statement run in a request adds its history row in the statement that writes its
audit record, and every TRIM_EVERY-th one of a user trims the user's history to the newest
HISTORY_KEEP (the console's list never shows more). Should the history
row fail (it never should), the audit record is written again alone: the history never
costs the audit log a record. With sign-in off, every caller is the one anonymous user ("").

Old records are pruned by age (AUDIT_RETENTION_DAYS): ``flask audit prune``, and at most once
an hour per process, by a short-lived thread that the statement due to start it leaves
behind (so no request waits for a large delete).
"""

from __future__ import annotations

import base64
import fcntl
import logging
import os
import sqlite3
import threading
import time
from datetime import datetime, timedelta
from typing import Any

import psycopg
from flask import Flask, current_app, g, has_app_context, has_request_context
from sqlalchemy import Connection, Engine, bindparam, delete, event, func, select, update
from sqlalchemy.exc import (
    DBAPIError,
    InterfaceError,
    NoResultFound,
    OperationalError,
    SQLAlchemyError,
)
from sqlalchemy.orm import Session

from ..errors import OUTAGE_KEY, Unprocessable, store_error_line
from ..extensions import db
from ..rules.secrets import mask
from ..store import AuditRecord, ConsoleHistory
from ..store.types import utcnow
from .common import server_autocommit

log = logging.getLogger(__name__)

# Each user keeps their newest statements in the history; older ones go as new ones come.
HISTORY_KEEP = 1000
# ... trimmed to that with every TRIM_EVERY-th statement of a user in a process; the console's
# list never shows more than HISTORY_KEEP.
TRIM_EVERY = 16
KINDS = ("sql", "project", "model", "skill", "agent", "database", "user", "token", "grant",
         "file", "view")
_PRUNE_EVERY_S = 3600.0
MAX_LIMIT = 1000
# The outcome of a streamed statement's record until its stream ends.
STREAMING = "streaming"


def _who() -> str | None:
    # Set by the entry guard (the signed-in user's name); the command line is "(cli)".
    if not has_request_context():
        return "(cli)"
    actor = g.get("quarry_actor")
    return actor.user_name if actor is not None else g.get("quarry_user_name")


_PENDING = "quarry.audit_pending"


def record_change(kind: str, action: str, target: str, before: Any, after: Any) -> None:
    """Keep the record of a change for the current session's commit, which writes it in the
    same transaction (a rollback drops it)."""
    db.session.info.setdefault(_PENDING, []).append(AuditRecord(
        at=utcnow(), user_name=_who(), kind=kind, action=action, target=target[:255],
        before=mask(before), after=mask(after)))


def _add_pending(session: Session) -> None:
    # The change itself is flushed first, the records after it: the change's own statements
    # keep their order (and their locks) exactly as without the audit log.
    pending = session.info.pop(_PENDING, None)
    if pending:
        session.flush()
        session.add_all(pending)


def _drop_pending(session: Session, *_: Any) -> None:
    session.info.pop(_PENDING, None)


def _listen_to_sessions() -> None:
    for name, listener in (("before_commit", _add_pending),
                           ("after_soft_rollback", _drop_pending)):
        if not event.contains(db.session, name, listener):
            event.listen(db.session, name, listener)


def record_statement(statement: str, source: str | None, row_count: int | None,
                     duration_ms: float, outcome: str, error_code: str | None, *,
                     history: dict[str, Any] | None = None) -> int:
    """Write the record of one SQL statement now; its id.

    ``history``: what the user's statement history keeps besides (``database``, the
    ``outcome`` as the console shows it, ``error_message``); only in a request, whose caller
    owns the row. A store error is raised (the caller answers 503, not the statement).
    """
    row: dict[str, Any] = {
        "at": utcnow(), "user_name": _who(), "kind": "sql", "action": "query",
        "source": source, "statement": statement, "row_count": row_count,
        "duration_ms": round(duration_ms, 3), "outcome": outcome, "error_code": error_code}
    return _writer().write(row, _history_row(statement, row, history))


def finish_statement(record_id: int, row_count: int | None, duration_ms: float,
                     outcome: str, *, history: dict[str, Any] | None = None,
                     statement: str = "") -> None:
    """Complete the record of a streamed statement (written as ``streaming`` before its
    first byte) with how it ended, and add its history row."""
    values = {"row_count": row_count, "duration_ms": round(duration_ms, 3),
              "outcome": outcome, "at": utcnow()}
    _writer().finish(record_id, values, _history_row(statement, values, history))


def _history_row(statement: str, row: dict[str, Any], history: dict[str, Any] | None
                 ) -> dict[str, Any] | None:
    if history is None or not has_request_context():
        return None
    code = row.get("error_code")
    return {
        "user_key": history_user(), "statement": statement, "ran_at": row["at"],
        "duration_ms": row["duration_ms"], "row_count": row["row_count"],
        # The context's db is the caller's text: cut to the column's size.
        "database": (history.get("database") or None) and history["database"][:63],
        "outcome": history["outcome"],
        "error_code": int(code) if code and code.isdigit() else None,
        "error_message": history.get("error_message")}


def history_user() -> str:
    """Whose history a request's statements go to: the signed-in user's name in lower case,
    or "" (the one anonymous user) when sign-in is off."""
    actor = g.get("quarry_actor") if has_request_context() else None
    return actor.user_name.lower() if actor is not None else ""


EXTENSION_KEY = "quarry.audit_log"
_AUDIT = AuditRecord.__table__
_HISTORY = ConsoleHistory.__table__
_AUDIT_COLUMNS = ("at", "user_name", "kind", "action", "source", "statement", "row_count",
                  "duration_ms", "outcome", "error_code")
_HISTORY_COLUMNS = ("user_key", "statement", "ran_at", "duration_ms", "row_count", "database",
                    "outcome", "error_code", "error_message")


def _insert(table: Any, columns: tuple[str, ...], prefix: str) -> Any:
    # Bound parameters named apart per table: one statement may carry both rows.
    return table.insert().values({c: bindparam(prefix + c) for c in columns})


_RECORD = _insert(_AUDIT, _AUDIT_COLUMNS, "a_").returning(_AUDIT.c.id)
_HISTORY_ROW = _insert(_HISTORY, _HISTORY_COLUMNS, "h_")
_FINISH_COLUMNS = ("row_count", "duration_ms", "outcome", "at")
_FINISH = (update(_AUDIT).where(_AUDIT.c.id == bindparam("a_id"))
           .values({c: bindparam("a_" + c) for c in _FINISH_COLUMNS}).returning(_AUDIT.c.id))


def _trim(keep: int) -> Any:
    """Delete the user's history rows but the newest ``keep`` (``h_user_key``)."""
    cutoff = (select(_HISTORY.c.id).where(_HISTORY.c.user_key == bindparam("h_user_key"))
              .order_by(_HISTORY.c.id.desc()).offset(keep).limit(1).scalar_subquery())
    return delete(_HISTORY).where(_HISTORY.c.user_key == bindparam("h_user_key"),
                                  _HISTORY.c.id <= cutoff)


def _prefixed(prefix: str, values: dict[str, Any]) -> dict[str, Any]:
    return {prefix + k: v for k, v in values.items()}


class StatementLog:
    """Writes statements' records (and history rows) on connections of its own.

    On PostgreSQL each write is one statement in autocommit: the record, the history row
    and the trim of the history as data-modifying CTEs of one INSERT (one round trip, one
    commit). On SQLite, whose statements cost no round trip, the same three run in one
    transaction, one write at a time on the machine (``SqliteWrites``).

    The commit does not wait for the store to flush its log to disk (unless
    AUDIT_SYNC_COMMIT): PostgreSQL's ``synchronous_commit = off`` for that one transaction,
    SQLite's ``synchronous = NORMAL`` (in WAL mode) around it. That flush (an fsync) costs
    4-15 ms on this machine, several times a SELECT 1. Without it the record is committed,
    visible to every reader at once, and survives any crash of Quarry's processes (it is
    in the store server's memory, or in the WAL file through the OS); only a crash of the
    store's server or machine in the next fraction of a second could lose it. Changes and
    their records keep the store's full durability.
    """

    def __init__(self, engine: Engine, retention_days: int, sync_commit: bool = False) -> None:
        self._engine = engine
        self._retention_days = retention_days
        self._sync_commit = sync_commit
        self._built: dict[tuple[Any, ...], Any] = {}
        self._untrimmed: dict[str, int] = {}  # per user key: rows since the last trim
        self._combined = engine.dialect.name == "postgresql"
        self._sqlite = SqliteWrites.of(engine, sync_commit)
        self._pruned_at: float | None = None
        self._prune_lock = threading.Lock()
        self._pruner: threading.Thread | None = None

    def _connect(self) -> Connection:
        return self._engine.connect()

    def write(self, row: dict[str, Any], history: dict[str, Any] | None) -> int:
        params = _prefixed("a_", {c: row[c] for c in _AUDIT_COLUMNS})
        record = _RECORD
        try:
            record_id = self._run(record, params, history)
        except (DBAPIError, psycopg.Error, sqlite3.Error) as error:
            if history is None or _unreachable(error):
                raise
            # The history row failed, not the store: the audit record alone, again.
            log.warning("audit: a history row could not be written (%s); the statement's "
                        "record is written without it", store_error_line(error))
            record_id = self._run(record, params, None)
        self._prune_when_due()
        return record_id

    def finish(self, record_id: int, values: dict[str, Any],
               history: dict[str, Any] | None) -> None:
        params = {"a_id": record_id, **_prefixed("a_", {c: values[c] for c in _FINISH_COLUMNS})}
        change = _FINISH
        try:
            self._run(change, params, history)
        except (SQLAlchemyError, psycopg.Error, sqlite3.Error) as error:
            # The answer has gone out already: its record keeps the outcome "streaming".
            log.warning("audit: the end of streamed statement %d could not be recorded: %s",
                        record_id, type(getattr(error, "orig", None) or error).__name__)

    def _run(self, first: Any, params: dict[str, Any], history: dict[str, Any] | None
             ) -> int:
        """``first`` (returning the record's id), then the history row and the trim."""
        # The history is trimmed with every TRIM_EVERY-th row of a user (in this process):
        # the trim reads the user's newest HISTORY_KEEP rows, several times the cost of the
        # rest of the write. Read now: a test narrows HISTORY_KEEP.
        keep = HISTORY_KEEP if history is not None and self._trim_due(history) else None
        if history is not None:
            params = {**params, **_prefixed("h_", history)}
        if self._combined:
            sql, defaults = self._driver_sql(first, history is not None, keep)
            with server_autocommit() as conn:
                return conn.execute(sql, {**defaults, **params}).fetchone()[0]
        if self._sqlite is not None:
            steps = [(first, params)]
            if history is not None:
                steps.append((_HISTORY_ROW, params))
            if history is not None and keep is not None:
                steps.append((self._trim(keep), params))
            return self._sqlite.run(steps)
        with self._connect() as conn:
            return self._run_sqlite(conn, first, params, history, keep)

    def warm(self) -> None:
        """Compile now the statements every request writes (its record, its history row,
        the end of a streamed one): their first compile cost each gunicorn worker's first
        statement 20-60 ms; a preloading master compiles them once for all its workers."""
        if self._combined:
            for first in (_RECORD, _FINISH):
                for history in (False, True):
                    self._driver_sql(first, history, None)
        elif self._sqlite is not None:
            for statement in (_RECORD, _HISTORY_ROW, _FINISH):
                self._sqlite.compile(statement)

    def _trim_due(self, history: dict[str, Any]) -> bool:
        # A race between two threads only moves a trim by a row or two.
        count = self._untrimmed.get(history["user_key"], 0)
        self._untrimmed[history["user_key"]] = (count + 1) % TRIM_EVERY
        return count == 0

    def _driver_sql(self, first: Any, history: bool, keep: int | None
                    ) -> tuple[str, dict[str, Any]]:
        """The combined statement as psycopg runs it, and the values of its own constants
        (psycopg straight: see ``common.server_autocommit``)."""
        key = ("sql", first is _RECORD, history, keep)
        if (found := self._built.get(key)) is None:
            compiled = self._combined_statement(first, history, keep).compile(
                dialect=self._engine.dialect)
            found = self._built[key] = (str(compiled), dict(compiled.params))
        return found

    def _combined_statement(self, first: Any, history: bool, keep: int | None) -> Any:
        """Built (and compiled, by ``_driver_sql``) once per shape: building one costs more
        than running it."""
        written = first.cte("written")
        columns = [written.c.id]
        if not self._sync_commit:
            # For this statement's own (implicit) transaction only: committed and visible
            # at once, without waiting for the WAL's flush to disk (see StatementLog).
            columns.append(func.set_config("synchronous_commit", "off", True))
        statement = select(*columns)
        if history:
            statement = statement.add_cte(_HISTORY_ROW.cte("added_history"))
        if history and keep is not None:
            # Every CTE sees the table as it was before the statement: the new row is not
            # among the rows the trim counts, so it keeps keep - 1 of the older ones.
            statement = statement.add_cte(_trim(keep - 1).cte("trimmed_history"))
        return statement

    def _run_sqlite(self, conn: Connection, first: Any, params: dict[str, Any],
                    history: dict[str, Any] | None, keep: int | None) -> int:
        if not self._sync_commit:
            # Per connection, outside a transaction: NORMAL for this write, then back.
            level = int(conn.exec_driver_sql("PRAGMA synchronous").scalar())
            conn.exec_driver_sql("PRAGMA synchronous=NORMAL")
        try:
            record_id = conn.execute(first, params).scalar_one()
            if history is not None:
                conn.execute(_HISTORY_ROW, params)
            if history is not None and keep is not None:
                conn.execute(self._trim(keep), params)
            conn.commit()
        except BaseException:
            if not self._sync_commit:
                conn.invalidate()  # closed, never reused with its level left at NORMAL
            raise
        if not self._sync_commit:
            conn.exec_driver_sql(f"PRAGMA synchronous={level}")
        return record_id

    def _trim(self, keep: int) -> Any:
        if (found := self._built.get(("trim", keep))) is None:
            found = self._built[("trim", keep)] = _trim(keep)
        return found

    def _prune_when_due(self) -> None:
        now = time.monotonic()
        if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY_S:
            return
        with self._prune_lock:
            if self._pruned_at is not None and now - self._pruned_at < _PRUNE_EVERY_S:
                return
            self._pruned_at = now
            self._pruner = threading.Thread(target=self._prune, name="quarry-audit-prune",
                                            daemon=True)
            self._pruner.start()

    def shutdown(self) -> None:
        """Wait for a pruning under way (its connection goes back to the pool before the
        pool is closed)."""
        pruner = self._pruner
        if pruner is not None and pruner.is_alive():
            pruner.join(timeout=10)
        if self._sqlite is not None:
            self._sqlite.close()

    def _prune(self) -> None:
        cutoff = utcnow() - timedelta(days=self._retention_days)
        try:
            with self._engine.begin() as conn:
                conn.execute(delete(AuditRecord).where(AuditRecord.at < cutoff))
        except SQLAlchemyError as error:
            log.warning("audit: pruning failed: %s", error)


def _unreachable(error: Exception) -> bool:
    """Whether a store error says the store cannot be used (not that a row was refused)."""
    if isinstance(error, DBAPIError) and error.connection_invalidated:
        return True
    return isinstance(error, OperationalError | InterfaceError | psycopg.OperationalError
                      | psycopg.InterfaceError | sqlite3.OperationalError
                      | sqlite3.InterfaceError)


class SqliteWrites:
    """The statement log's writes on a SQLite store file: on a connection of their own per
    process, one write at a time on the machine.

    Every statement writes its record, so on SQLite (one writer at a time) concurrent
    requests queue for the store's write lock. SQLite's own wait for that lock (its busy
    handler) polls with growing sleeps, 1, 2, 5, 10, 15, 20, 25 ms…: under 8 concurrent
    clients a record waited tens of milliseconds with the lock long free (the p99 of
    ``SELECT 1`` was 5-10 times its median, and the audit write the half of the service's
    throughput). Here the writers of a process take a thread lock, and the processes an
    exclusive ``flock`` on a file beside the store (``<store>-audit.lock``), both woken
    the moment the holder lets go; the SQLite lock is then nearly always free at once (a
    change's own transaction may still hold it, and is waited for as before).

    The connection is opened in each process (after gunicorn's fork) and kept: no pool
    checkout, no reset on return, and ``synchronous = NORMAL`` set once on it rather than
    set and restored around each write (unless AUDIT_SYNC_COMMIT); the store's other
    connections keep their own level. Statements are compiled once, run through the
    sqlite3 driver with the column types' own conversions.
    """

    def __init__(self, path: str, dialect: Any, sync_commit: bool) -> None:
        self._path = path
        self._dialect = dialect
        self._sync_commit = sync_commit
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._pid: int | None = None
        self._inherited: list[tuple[sqlite3.Connection, int | None]] = []
        self._compiled: dict[int, tuple[str, tuple[str, ...], dict[str, Any], dict[str, Any]]] \
            = {}

    @classmethod
    def of(cls, engine: Engine, sync_commit: bool) -> SqliteWrites | None:
        """For a store in a SQLite file; None otherwise (a server, or in memory)."""
        url = engine.url
        if engine.dialect.name != "sqlite" or not url.database or url.database == ":memory:" \
                or url.database.startswith("file:") or url.query:
            return None
        return cls(os.path.abspath(url.database), engine.dialect, sync_commit)

    def run(self, steps: list[tuple[Any, dict[str, Any]]]) -> int:
        """Run ``steps`` (statement, parameters) in one transaction; the first returns the
        record's id."""
        with self._lock:
            conn = self._connection()
            if self._lock_fd is not None:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX)
            try:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    first = None
                    for statement, params in steps:
                        rows = conn.execute(*self._bound(statement, params)).fetchall()
                        if first is None:
                            first = rows
                    conn.execute("COMMIT")
                except BaseException:
                    if conn.in_transaction:
                        conn.execute("ROLLBACK")
                    raise
            except sqlite3.OperationalError:
                self._drop()  # locked out, or I/O trouble: a fresh connection next time
                raise
            finally:
                if self._lock_fd is not None:
                    fcntl.flock(self._lock_fd, fcntl.LOCK_UN)
        outage = current_app.extensions.get(OUTAGE_KEY) if has_app_context() else None
        if outage is not None:
            outage.answered()
        if not first:  # an update of a record pruned meanwhile: as SQLAlchemy's scalar_one
            raise NoResultFound("the audit record is gone")
        return first[0][0]

    def compile(self, statement: Any) -> tuple[str, tuple[str, ...], dict[str, Any],
                                               dict[str, Any]]:
        """The statement as sqlite3 runs it (kept: compiling costs more than running)."""
        found = self._compiled.get(id(statement))
        if found is None:
            compiled = statement.compile(dialect=self._dialect)
            processors = {}
            for name, bind in compiled.binds.items():
                processor = bind.type.dialect_impl(self._dialect).bind_processor(self._dialect)
                if processor is not None:
                    processors[name] = processor
            found = (str(compiled), tuple(compiled.positiontup or ()), dict(compiled.params),
                     processors)
            self._compiled[id(statement)] = found
        return found

    def _bound(self, statement: Any, params: dict[str, Any]) -> tuple[str, list[Any]]:
        sql, names, defaults, processors = self.compile(statement)
        values = []
        for name in names:
            value = params[name] if name in params else defaults[name]
            processor = processors.get(name)
            values.append(processor(value) if processor is not None and value is not None
                          else value)
        return sql, values

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:
            # The parent's, inherited through a fork: kept, never closed or used here (SQLite
            # must not close a connection in another process than the one that opened it).
            self._inherited.append((self._conn, self._lock_fd))
        conn = sqlite3.connect(self._path, timeout=30, isolation_level=None,
                               check_same_thread=False)
        try:
            if not self._sync_commit:
                conn.execute("PRAGMA synchronous=NORMAL")
        except BaseException:
            conn.close()
            raise
        try:
            fd: int | None = os.open(self._path + "-audit.lock",
                                     os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        except OSError as error:  # a folder this process may not write to: SQLite's wait
            log.warning("audit: no lock file beside the store (%s); records wait for the "
                        "store's lock as SQLite polls for it", error)
            fd = None
        self._conn, self._lock_fd, self._pid = conn, fd, os.getpid()
        return conn

    def _drop(self) -> None:
        conn, fd = self._conn, self._lock_fd
        self._conn = self._lock_fd = None
        if conn is not None:
            conn.close()
        if fd is not None:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def close(self) -> None:
        with self._lock:
            if self._pid == os.getpid():
                self._drop()


def _writer() -> StatementLog:
    return current_app.extensions[EXTENSION_KEY]


def init_audit(app: Flask) -> StatementLog:
    """The app's statement log."""
    with app.app_context():
        engine = db.engine
    _listen_to_sessions()
    statement_log = StatementLog(engine, app.config["AUDIT_RETENTION_DAYS"],
                                 app.config["AUDIT_SYNC_COMMIT"])
    app.extensions[EXTENSION_KEY] = statement_log
    return statement_log


def prune(days: int | None = None) -> int:
    """Delete records older than the retention; how many went."""
    days = current_app.config["AUDIT_RETENTION_DAYS"] if days is None else days
    cutoff = utcnow() - timedelta(days=days)
    deleted = db.session.execute(delete(AuditRecord).where(AuditRecord.at < cutoff)).rowcount
    db.session.commit()
    return deleted


def encode_cursor(record_id: int) -> str:
    return base64.urlsafe_b64encode(f"a{record_id}".encode()).decode().rstrip("=")


def _decode_cursor(cursor: str) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        if not text.startswith("a"):
            raise ValueError(text)
        return int(text[1:])
    except (ValueError, UnicodeDecodeError):
        # 422: any string has the shape of a cursor; only the service can tell it is none.
        raise Unprocessable(f"Invalid cursor {cursor!r}: pass the next_cursor of a previous "
                            "page", title="Invalid cursor",
                            errors={"after": ["Not a valid cursor."]}) from None


def list_records(*, user: str | None = None, since: datetime | None = None,
                 kind: str | None = None, after: str | None = None, limit: int = 100
                 ) -> tuple[list[AuditRecord], str | None]:
    """Newest first, ``limit`` a page; the cursor of the next page (keyset on id) or None."""
    query = select(AuditRecord)
    if user is not None:
        query = query.where(AuditRecord.user_name == user)
    if since is not None:
        query = query.where(AuditRecord.at >= since)
    if kind is not None:
        query = query.where(AuditRecord.kind == kind)
    if after is not None:
        query = query.where(AuditRecord.id < _decode_cursor(after))
    rows = list(db.session.scalars(query.order_by(AuditRecord.id.desc()).limit(limit + 1)))
    more = len(rows) > limit
    rows = rows[:limit]
    return rows, encode_cursor(rows[-1].id) if more else None


COLUMNS = ("id", "at", "user_name", "kind", "action", "target", "before", "after", "source",
           "statement", "row_count", "duration_ms", "outcome", "error_code")


def rows_for_sql(limit: int) -> list[tuple[Any, ...]]:
    """The newest ``limit`` records as rows of ``quarry.audit`` (newest first)."""
    records = db.session.scalars(select(AuditRecord).order_by(AuditRecord.id.desc())
                                 .limit(limit))
    return [tuple(getattr(r, c) for c in COLUMNS) for r in records]
