"""A statement while it runs: its id, and how to stop it from another thread or process.

``Statement`` is created by the caller of the data path (the service that registers running
statements), handed down to ``run_statement`` / ``open_stream``, which attach the pooled
connection to it while the statement runs. Any thread may then call ``cancel()``: SQLite's
``interrupt()``, PostgreSQL's cancel request, MariaDB's ``KILL QUERY`` through a second
connection. ``cancel_backend`` stops a statement of another process, from the database id
of the session running it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from .errors import ErrorCode, SqlError
from .sources import DataSource, mysql_connection_class

log = logging.getLogger(__name__)

# Why a statement was stopped by someone other than the database's own time limit.
CANCELLED, TIME_LIMIT, CLIENT_GONE = "cancelled", "time limit", "client gone"
SHUTDOWN = "process stopping"


class Statement:
    """One running data statement (thread-safe)."""

    def __init__(self, query_id: str, *, sql: str = "", source: str = "",
                 response_format: str = "json", user: str | None = None,
                 streamed: bool = False) -> None:
        self.id = query_id
        self.sql = sql
        self.source = source
        self.response_format = response_format
        self.user = user
        self.streamed = streamed
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC)
        self.rows_sent = 0
        self.backend_id: str | None = None
        self.deadline: float | None = None    # monotonic; the whole stream's time limit
        self.stopped: str | None = None       # CANCELLED, TIME_LIMIT, CLIENT_GONE, SHUTDOWN
        self.thread = threading.get_ident()   # the thread running it (it makes it)
        # A federated statement's legs (app/federation/plan.py: source, sql, rows).
        self.legs: list[Any] = []
        # Set by the registry: asks the store whether another process requested a cancel
        # (the database may report the cancel before this process has heard of it).
        self.confirm_cancel: Callable[[], bool] | None = None
        # Set by the caller of a stream: True when the HTTP client has gone away.
        self.client_gone: Callable[[], bool] | None = None
        self._cancel: Callable[[], None] | None = None
        self._lock = threading.Lock()

    # -- the connection running it -----------------------------------------------------------

    def attach(self, source: DataSource, conn: Any) -> None:
        """The pooled connection ``conn`` of ``source`` runs this statement from now on."""
        driver = conn.driver_connection
        if source.dialect == "sqlite":
            cancel = driver.interrupt
        elif source.dialect == "postgresql":
            self.backend_id = str(driver.info.backend_pid)
            cancel = driver.cancel
        else:
            self.backend_id = str(driver.thread_id())
            cancel = _mysql_killer(driver)
        conn.info["quarry.query_id"] = self.id
        with self._lock:
            self._cancel = cancel
            stopped = self.stopped
        if stopped:  # cancelled before it even started
            cancel()

    def reattach(self, backend_id: str, cancel: Callable[[], None]) -> None:
        """The statement moved to another database session (a stream read by ADBC)."""
        with self._lock:
            self.backend_id = backend_id
            self._cancel = cancel
            stopped = self.stopped
        if stopped:
            cancel()

    def detach(self, conn: Any) -> None:
        """The statement is over: a late cancel must not reach the connection's next user."""
        with self._lock:
            self._cancel = None
        conn.info.pop("quarry.query_id", None)

    # -- stopping it -------------------------------------------------------------------------

    def cancel(self, reason: str = CANCELLED) -> None:
        """Stop the statement inside the database (from any thread); idempotent."""
        with self._lock:
            if self.stopped is None:
                self.stopped = reason
            cancel = self._cancel
            if cancel is None:
                return
            try:
                cancel()
            except Exception as exc:  # noqa: BLE001 - the statement may have just ended
                log.info("cancel of statement %s failed: %s", self.id, exc)

    def was_stopped(self) -> str | None:
        """Why it was stopped (asking the store once when nothing is known here)."""
        if self.stopped is None and self.confirm_cancel is not None and self.confirm_cancel():
            self.stopped = CANCELLED
        return self.stopped

    def check(self) -> None:
        """Between two batches of a stream: raise if it must stop now."""
        if self.stopped is None and self.deadline is not None \
                and time.monotonic() > self.deadline:
            self.stopped = TIME_LIMIT
        if self.stopped is not None:
            raise self.error()

    def error(self, timeout_s: float | None = None) -> SqlError:
        if self.stopped == TIME_LIMIT:
            limit = f" of {timeout_s:g} s" if timeout_s else ""
            return SqlError(ErrorCode.TIME_LIMIT,
                            f"The statement was cancelled: it ran past the time limit{limit}")
        if self.stopped == SHUTDOWN:
            return SqlError(ErrorCode.CANCELLED, "The statement was cancelled: the Quarry "
                                                 "process running it was stopping")
        if self.stopped == CLIENT_GONE:
            return SqlError(ErrorCode.CANCELLED, "The statement was cancelled: the client "
                                                 "closed the connection")
        return SqlError(ErrorCode.CANCELLED, f"The statement was cancelled (query id "
                                             f"{self.id})")


def _mysql_killer(my: Any) -> Callable[[], None]:
    """KILL QUERY for the session of ``my``, sent through a second, short-lived connection
    (the first one is busy waiting for its statement)."""
    thread_id = my.thread_id()

    def kill() -> None:
        # PyMySQL's connection class, its TLS context shared.
        other = mysql_connection_class()(host=my.host, port=my.port, user=my.user,
                                         password=my.password, connect_timeout=5)
        try:
            with other.cursor() as cursor:
                cursor.execute(f"KILL QUERY {int(thread_id)}")
        finally:
            other.close()

    return kill


def cancel_backend(source: DataSource, backend_id: str, query_id: str) -> bool:
    """Stop statement ``query_id`` running in another process, in the database session
    ``backend_id`` of ``source``; whether a signal was sent.

    The session is checked to still run that statement (its text carries the query id:
    a leading comment (``marked``), or the name of a stream's server-side cursor), so a
    session that went back to the pool and now runs someone else's statement is left
    alone. SQLite sessions live inside their process: only the owning
    process can stop them (it watches the store for cancel requests).
    """
    if source.dialect not in ("postgresql", "mysql") or not backend_id.isdigit():
        return False
    try:
        conn = source.connect()
    except Exception as exc:  # noqa: BLE001 - busy or down: the owner's watcher still acts
        log.info("no connection to cancel %s on %s: %s", query_id, source.name, exc)
        return False
    try:
        driver = conn.driver_connection
        marker = f"%quarry_{query_id}%"
        if source.dialect == "postgresql":
            row = driver.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                "WHERE pid = %s AND query LIKE %s", (int(backend_id), marker)).fetchone()
            return bool(row and row[0])
        with driver.cursor() as cursor:
            cursor.execute("SELECT ID FROM information_schema.PROCESSLIST "
                           "WHERE ID = %s AND INFO LIKE %s", (int(backend_id), marker))
            if cursor.fetchone() is None:
                return False
            cursor.execute(f"KILL QUERY {int(backend_id)}")
        return True
    except Exception as exc:  # noqa: BLE001 - a failed cancel must not fail the request
        log.info("cancel of %s on %s failed: %s", query_id, source.name, exc)
        return False
    finally:
        conn.close()


def cancel_marked(source: DataSource, marker: str) -> int:
    """Stop every statement of ``source`` whose text carries ``marker`` (a federated
    statement's reads that another engine sends, e.g. Spark's JDBC queries); how many
    were signalled. Only the source's own account's sessions can be reached, which is
    the account those reads use."""
    if source.dialect not in ("postgresql", "mysql"):
        return 0
    pattern = f"%{marker}%"
    try:
        conn = source.connect()
    except Exception as exc:  # noqa: BLE001 - busy or down: nothing more can be done here
        log.info("no connection to stop %s on %s: %s", marker, source.name, exc)
        return 0
    try:
        driver = conn.driver_connection
        if source.dialect == "postgresql":
            rows = driver.execute(
                "SELECT pg_cancel_backend(pid) FROM pg_stat_activity "
                "WHERE query LIKE %s AND state <> 'idle' AND pid <> pg_backend_pid()",
                (pattern,)).fetchall()
            return sum(1 for row in rows if row[0])
        with driver.cursor() as cursor:
            cursor.execute("SELECT ID FROM information_schema.PROCESSLIST "
                           "WHERE INFO LIKE %s AND ID <> CONNECTION_ID()", (pattern,))
            found = [int(row[0]) for row in cursor.fetchall()]
            for thread in found:
                try:
                    cursor.execute(f"KILL QUERY {thread}")
                except Exception as exc:  # noqa: BLE001 - it may have just ended
                    log.info("KILL QUERY %s on %s: %s", thread, source.name, exc)
        return len(found)
    except Exception as exc:  # noqa: BLE001 - a failed cancel must not fail the request
        log.info("stopping %s on %s failed: %s", marker, source.name, exc)
        return 0
    finally:
        conn.close()


def cursor_name(conn: Any, fallback: int) -> str:
    """The PostgreSQL server-side cursor's name: it carries the query id, which lets
    ``cancel_backend`` recognise the statement in pg_stat_activity."""
    query_id = conn.info.get("quarry.query_id")
    return f"quarry_{query_id}" if query_id else f"quarry_{fallback}"


def marked(conn: Any, sql: str) -> str:
    """The statement with its query id in a leading comment (shown by MariaDB's process
    list and PostgreSQL's pg_stat_activity, where ``cancel_backend`` looks for it)."""
    query_id = conn.info.get("quarry.query_id")
    return f"/* quarry_{query_id} */ {sql}" if query_id else sql

