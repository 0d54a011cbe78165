"""The audit log: every change (with before and after, secrets masked) and every SQL statement.

A change's record is added to the session of the change itself, before the service commits:
the two land together or not at all. A statement's record has no change to travel with (a
read changes nothing in the store), and a commit of its own would cost a read many times its
own time (an fsync: about 10 ms on SQLite against 1 ms for SELECT 1). So statements' records
are queued in the process and written in batches, by one thread, every half second (and at
exit, and before this process reads the log): a record reaches the store within about a
second, or is lost with its process if that is killed outright.
Old records are pruned by age (AUDIT_RETENTION_DAYS): ``flask audit prune``, and at most
once an hour by that writer thread.

The same batches keep each user's statement history (``console_history``, what the console
lists): a statement run in a request adds its history row to the queue with its audit
record, and the writer writes both with the batch (the history in a transaction of its own,
so that it never costs the audit log a record); nothing more is written on the request path.
A user keeps their newest HISTORY_KEEP statements (trimmed by the writer after each batch).
With sign-in off, every caller is the one anonymous user ("").
"""

from __future__ import annotations

import atexit
import base64
import logging
import os
import threading
import time
import weakref
from datetime import datetime, timedelta
from typing import Any

from flask import Flask, current_app, g, has_request_context
from sqlalchemy import Connection, Engine, delete, event, select
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from ..errors import Unprocessable
from ..extensions import db
from ..rules.secrets import mask
from ..store import AuditRecord, ConsoleHistory
from ..store.types import utcnow

log = logging.getLogger(__name__)

# Each user keeps their newest statements in the history; older ones go as new ones come.
HISTORY_KEEP = 1000
KINDS = ("sql", "project", "model", "skill", "agent", "database", "user", "token", "grant",
         "file", "view")
_PRUNE_EVERY_S = 3600.0
MAX_LIMIT = 1000


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
                     history: dict[str, Any] | None = None) -> None:
    """Queue the record of one SQL statement for the writer thread.

    ``history``: what the user's statement history keeps besides (``database``, the
    ``outcome`` as the console shows it, ``error_message``); only in a request, whose caller
    owns the row.
    """
    who = _who()
    row: dict[str, Any] = {
        "at": utcnow(), "user_name": who, "kind": "sql", "action": "query",
        "source": source, "statement": statement, "row_count": row_count,
        "duration_ms": round(duration_ms, 3), "outcome": outcome, "error_code": error_code}
    if history is not None and has_request_context():
        row[_HISTORY] = {
            "user_key": history_user(), "statement": statement, "ran_at": row["at"],
            "duration_ms": row["duration_ms"], "row_count": row_count,
            # The context's db is the caller's text: cut to the column's size.
            "database": (history.get("database") or None) and history["database"][:63],
            "outcome": history["outcome"],
            "error_code": int(error_code) if error_code and error_code.isdigit() else None,
            "error_message": history.get("error_message")}
    current_app.extensions[EXTENSION_KEY].add(row)


def history_user() -> str:
    """Whose history a request's statements go to: the signed-in user's name in lower case,
    or "" (the one anonymous user) when sign-in is off."""
    actor = g.get("quarry_actor") if has_request_context() else None
    return actor.user_name.lower() if actor is not None else ""


_HISTORY = "history"


EXTENSION_KEY = "quarry.audit_log"
_FLUSH_EVERY_S = 0.5
_BATCH = 500


class StatementLog:
    """The queue of statements' records and the thread that writes them in batches.

    The thread starts with the first record of a process (so a gunicorn master that built
    the app never runs one, and each forked worker starts its own).
    """

    def __init__(self, engine: Engine, retention_days: int) -> None:
        self._engine = engine
        self._retention_days = retention_days
        self._rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid: int | None = None
        self._closed = False
        self._pruned_at = 0.0

    def add(self, row: dict[str, Any]) -> None:
        with self._lock:
            self._rows.append(row)
            if self._pid != os.getpid():
                self._pid, self._rows = os.getpid(), [row]  # rows of a parent stay there
                self._thread = threading.Thread(target=self._run, name="quarry-audit",
                                                daemon=True)
                self._thread.start()
            full = len(self._rows) >= _BATCH
        if full:
            self._wake.set()

    def flush(self) -> None:
        """Write every queued record now (with the history rows they carry)."""
        with self._lock:
            rows, self._rows = self._rows, []
        if not rows:
            return
        history = [row.pop(_HISTORY) for row in rows if _HISTORY in row]
        try:
            with self._engine.begin() as conn:
                conn.execute(AuditRecord.__table__.insert(), rows)
        except SQLAlchemyError:
            log.exception("audit: %d statement record(s) could not be written", len(rows))
        if not history:
            return
        # A transaction of its own: whatever befalls the history never costs the audit log.
        try:
            with self._engine.begin() as conn:
                conn.execute(ConsoleHistory.__table__.insert(), history)
                for user_key in {h["user_key"] for h in history}:
                    _trim_history(conn, user_key)
        except SQLAlchemyError:
            log.exception("audit: %d history row(s) could not be written", len(history))

    def _run(self) -> None:
        while not self._closed:
            self._wake.wait(_FLUSH_EVERY_S)
            self._wake.clear()
            self.flush()
            if time.monotonic() - self._pruned_at >= _PRUNE_EVERY_S:
                self._pruned_at = time.monotonic()
                self._prune()

    def _prune(self) -> None:
        cutoff = utcnow() - timedelta(days=self._retention_days)
        try:
            with self._engine.begin() as conn:
                conn.execute(delete(AuditRecord).where(AuditRecord.at < cutoff))
        except SQLAlchemyError:
            log.exception("audit: pruning failed")

    def shutdown(self) -> None:
        self._closed = True
        self._wake.set()
        if self._thread is not None and self._pid == os.getpid():
            self._thread.join(timeout=5)
        self.flush()


def _trim_history(conn: Connection, user_key: str) -> None:
    """Forget a user's statements beyond the newest HISTORY_KEEP."""
    table = ConsoleHistory.__table__
    cutoff = conn.scalar(select(table.c.id).where(table.c.user_key == user_key)
                         .order_by(table.c.id.desc()).offset(HISTORY_KEEP).limit(1))
    if cutoff is not None:
        conn.execute(delete(table).where(table.c.user_key == user_key, table.c.id <= cutoff))


def init_audit(app: Flask) -> StatementLog:
    """The app's statement log; written out at exit too."""
    with app.app_context():
        engine = db.engine
    _listen_to_sessions()
    statement_log = StatementLog(engine, app.config["AUDIT_RETENTION_DAYS"])
    app.extensions[EXTENSION_KEY] = statement_log
    # At exit (a gunicorn worker stopping), what is queued is written; a weak reference, so
    # that the many apps of a test run are not kept alive by it.
    atexit.register(_flush_at_exit, weakref.ref(statement_log))
    return statement_log


def _flush_at_exit(ref: weakref.ref) -> None:
    statement_log = ref()
    if statement_log is not None:
        statement_log.flush()


def flush() -> None:
    """Write this process's queued statement records (before reading the log)."""
    current_app.extensions[EXTENSION_KEY].flush()


def prune(days: int | None = None) -> int:
    """Delete records older than the retention; how many went."""
    days = current_app.config["AUDIT_RETENTION_DAYS"] if days is None else days
    flush()
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
    flush()
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
    flush()
    records = db.session.scalars(select(AuditRecord).order_by(AuditRecord.id.desc())
                                 .limit(limit))
    return [tuple(getattr(r, c) for c in COLUMNS) for r in records]
