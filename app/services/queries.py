"""Running SQL statements: ids, the list of what runs, and cancel from any worker.

Every statement of POST /api/sql/query gets an id (the SQL adapter runs it:
``app/mindsdb/queries.py``). The statements of this process are kept
in memory (``RunningStatements``); the ones another process may need to see are written to
the store (table ``running_queries``): a stream at once (its id is in the header the client
reads), a buffered statement once it has run for REGISTER_AFTER_S (a fast ``SELECT 1`` never
writes to the store; nobody could have cancelled it anyway).

Cancel (``DELETE /api/sql/queries/<id>``, ``SELECT query_cancel('<id>')``), received by any
worker of any instance:
1. sets ``cancel_requested`` on the row;
2. stops the statement in the database at once when it can: the owner process cancels its
   own connection; another process reaches a PostgreSQL or MariaDB statement through a
   second connection of the same data source (``pg_cancel_backend``, ``KILL QUERY``);
3. the owner's watcher thread polls the store every POLL_S for cancel requests of its own
   registered statements, and cancels them itself: that is the only way to reach a SQLite
   statement (its interrupt works only in-process) or a stream waiting between batches.

The watcher runs only while this process has statements running: one indexed SELECT per
POLL_S then, and one UPDATE per statement and REFRESH_S (rows sent so far, and ``seen_at``,
by which a row left by a process that died is recognised as stale and ignored). The legs of
a statement over several data sources go with it (column ``legs``, JSON): at once when a leg
starts or ends or gets a dynamic filter (within POLL_S), and their rows every REFRESH_S —
never per batch, so that no leg waits for the store.
"""

from __future__ import annotations

import json
import logging
import os
import re
import socket
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from flask import Flask, current_app
from sqlalchemy import delete, insert, select, update

from ..errors import NotFound, shown, store_error_line
from ..extensions import db
from ..sql.running import CLIENT_GONE, TIME_LIMIT, Statement, cancel_backend
from ..sql.sources import current_sources
from ..store import RunningQuery

log = logging.getLogger(__name__)
EXTENSION_KEY = "quarry.queries"
POLL_S = 0.2
REGISTER_AFTER_S = 0.2
REFRESH_S = 1.0
STALE_S = 15.0
_TABLE = RunningQuery.__table__

def init_queries(app: Flask) -> None:
    app.extensions[EXTENSION_KEY] = RunningStatements(app)


def running() -> RunningStatements:
    return current_app.extensions[EXTENSION_KEY]


# What new_query_id makes: the OpenAPI document states it as the path parameter's pattern.
QUERY_ID = re.compile(r"[0-9a-f]{32}")


def new_query_id() -> str:
    return uuid.uuid4().hex


class RunningStatements:
    """The statements running in this process, and the thread that watches them."""

    def __init__(self, app: Flask) -> None:
        self.app = app
        self.host = socket.gethostname()[:255]
        self._items: dict[str, Statement] = {}
        self._registered: set[str] = set()
        self._legs_written: dict[str, Any] = {}  # id -> the legs' state last written
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    # -- in the request's thread -------------------------------------------------------------

    def begin(self, statement: Statement) -> None:
        statement.confirm_cancel = lambda: self._cancel_asked(statement.id)
        with self._lock:
            self._items[statement.id] = statement
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._watch, daemon=True,
                                                name="quarry-query-watcher")
                self._thread.start()

    def register(self, statement: Statement) -> None:
        """Write the row now (a stream: its id is about to reach the client)."""
        with self._lock:
            if statement.id in self._items and statement.id not in self._registered:
                self._insert([statement])

    def end(self, statement: Statement) -> None:
        with self._lock:
            self._items.pop(statement.id, None)
            if statement.id not in self._registered:
                return
            self._registered.discard(statement.id)
            self._legs_written.pop(statement.id, None)
        try:
            with db.engine.begin() as conn:
                conn.execute(delete(_TABLE).where(_TABLE.c.id == statement.id))
        except Exception as exc:  # noqa: BLE001 - the row goes stale and is swept later
            log.warning("running query %s not removed from the store: %s", statement.id, exc)

    def cancel_in_threads(self, threads: set[int | None], reason: str) -> int:
        """Cancel the statements run by ``threads`` of this process; how many."""
        with self._lock:
            chosen = [s for s in self._items.values() if s.thread in threads]
        for statement in chosen:
            statement.cancel(reason)
        return len(chosen)

    def local(self, query_id: str) -> Statement | None:
        with self._lock:
            return self._items.get(query_id)

    # -- the store ---------------------------------------------------------------------------

    def _insert(self, statements: list[Statement]) -> None:
        """Insert rows for ``statements`` (the lock is held by the caller)."""
        now = datetime.now(UTC)
        rows = [{"id": s.id, "user_name": s.user, "source": _sources(s), "statement": s.sql,
                 "response_format": s.response_format, "started_at": s.started_at,
                 "seen_at": now, "rows_sent": s.rows_sent, "host": self.host,
                 "pid": os.getpid(), "backend_id": s.backend_id, "cancel_requested": False,
                 "legs": self._legs_text(legs_of(s), s.id)}
                for s in statements]
        with db.engine.begin() as conn:
            conn.execute(insert(_TABLE), rows)
        self._registered.update(s.id for s in statements)

    def _legs_text(self, legs: list[dict[str, Any]] | None, query_id: str) -> str | None:
        """The legs as JSON, noting what was written (the lock is held by the caller,
        who writes it)."""
        if legs is None:
            return None
        self._legs_written[query_id] = _without_rows(legs)
        return json.dumps(legs)

    def _cancel_asked(self, query_id: str) -> bool:
        if query_id not in self._registered:
            return False
        with db.engine.connect() as conn:
            return bool(conn.execute(select(_TABLE.c.cancel_requested)
                                     .where(_TABLE.c.id == query_id)).scalar())

    # -- the watcher thread ------------------------------------------------------------------

    def shutdown(self) -> None:
        """Stop the watcher and wait for it: a poll under way holds a store connection, which
        must be back in the pool before the pool is closed (the app's teardown)."""
        self._stop.set()
        with self._lock:
            thread = self._thread
        if thread is not None:
            thread.join(timeout=10)

    def _watch(self) -> None:
        last_refresh = 0.0
        while not self._stop.wait(POLL_S):
            with self._lock:
                if not self._items:
                    self._thread = None
                    return
                items = list(self._items.values())
            now = time.monotonic()
            for statement in items:
                if statement.deadline is not None and now > statement.deadline:
                    statement.cancel(TIME_LIMIT)
                elif statement.client_gone is not None and statement.client_gone():
                    statement.cancel(CLIENT_GONE)
            try:
                with self.app.app_context():
                    self._poll_store(now, now - last_refresh >= REFRESH_S)
                if now - last_refresh >= REFRESH_S:
                    last_refresh = now
            except Exception as exc:  # noqa: BLE001 - the store may be down for a while
                log.warning("running queries: the store cannot be reached: %s",
                            store_error_line(exc))

    def _poll_store(self, now: float, refresh: bool) -> None:
        with self._lock:
            due = [s for s in self._items.values()
                   if s.id not in self._registered and now - s.started >= REGISTER_AFTER_S]
            if due:
                self._insert(due)
            mine = [s for s in self._items.values() if s.id in self._registered]
        if not mine:
            return
        with db.engine.begin() as conn:
            asked = set(conn.execute(select(_TABLE.c.id).where(
                _TABLE.c.id.in_([s.id for s in mine]), _TABLE.c.cancel_requested)).scalars())
            for statement in mine:
                if statement.id in asked:
                    statement.cancel()
            seen = datetime.now(UTC)
            for statement in mine:
                values: dict[str, Any] = {}
                legs = legs_of(statement)
                if legs is not None and (refresh or _without_rows(legs) !=
                                         self._legs_written.get(statement.id)):
                    with self._lock:
                        values["legs"] = self._legs_text(legs, statement.id)
                    # The row may have been written before the statement was planned
                    # (REGISTER_AFTER_S on a busy machine): its sources are known by now.
                    values["source"] = _sources(statement)
                if refresh:
                    values.update(rows_sent=statement.rows_sent, seen_at=seen,
                                  backend_id=statement.backend_id)
                if values:
                    conn.execute(update(_TABLE).where(_TABLE.c.id == statement.id)
                                 .values(**values))
            if refresh:
                conn.execute(delete(_TABLE).where(
                    _TABLE.c.seen_at < seen - timedelta(seconds=4 * STALE_S)))


# ---------------------------------------------------------------------------- list and cancel


def _sources(statement: Statement) -> str:
    """The statement's sources as the store's column holds them (63 characters: a statement
    over many sources is listed with its first names; its legs name every one)."""
    return statement.source[:63]


def legs_of(statement: Statement) -> list[dict[str, Any]] | None:
    """The legs of a statement over several data sources (None for one source): source,
    SQL sent (without its dynamic filter's keys), state, rows delivered so far, and the
    dynamic filters added at run time."""
    if not statement.legs:
        return None
    return [{"source": leg.source.name, "sql": leg.sql, "state": leg.state, "rows": leg.rows,
             "filters": list(leg.dynamic)} for leg in list(statement.legs)]


def _without_rows(legs: list[dict[str, Any]]) -> list[tuple]:
    return [(leg["state"], len(leg["filters"])) for leg in legs]


def _fresh() -> Any:
    return _TABLE.c.seen_at >= datetime.now(UTC) - timedelta(seconds=STALE_S)


def _visible(user: str | None) -> Any:
    """A signed-in user sees their own statements (an admin all, once roles exist)."""
    if current_app.config["AUTH_REQUIRED"]:
        return _TABLE.c.user_name == user
    return True  # sign-in off: every caller is the same anonymous user


def list_queries(user: str | None) -> list[dict[str, Any]]:
    """The statements running now in every worker and instance on this store."""
    with db.engine.connect() as conn:
        rows = conn.execute(select(_TABLE).where(_fresh(), _visible(user))
                            .order_by(_TABLE.c.started_at, _TABLE.c.id)).mappings().all()
    registry = running()
    answer = []
    for row in rows:
        local = registry.local(row["id"])  # this process knows the count to the batch
        item = {
            "query_id": row["id"], "user": row["user_name"], "source": row["source"],
            "statement": row["statement"], "response_format": row["response_format"],
            "started_at": row["started_at"],
            "rows_sent": local.rows_sent if local is not None else row["rows_sent"],
            "cancel_requested": row["cancel_requested"]}
        # The process running it knows its legs to the batch; others read the store's copy.
        legs = legs_of(local) if local is not None else \
            json.loads(row["legs"]) if row["legs"] else None
        if legs:
            item["legs"] = legs
        answer.append(item)
    return answer


def cancel_query(query_id: str, user: str | None) -> dict[str, Any]:
    """Stop running statement ``query_id``; NotFound when it is unknown or over."""
    if not QUERY_ID.fullmatch(query_id):
        # No statement has such an id; and text like a NUL never reaches the store.
        raise NotFound(f"No running statement has the query id '{shown(query_id)}'",
                       title="Query not found")
    registry = running()
    with db.engine.begin() as conn:
        row = conn.execute(select(_TABLE).where(_TABLE.c.id == query_id, _fresh(),
                                                _visible(user))).mappings().first()
        if row is not None:
            conn.execute(update(_TABLE).where(_TABLE.c.id == query_id)
                         .values(cancel_requested=True))
    local = registry.local(query_id)
    if local is not None and row is None and current_app.config["AUTH_REQUIRED"] \
            and local.user != user:
        local = None  # another user's statement, not registered yet
    if row is None and local is None:
        raise NotFound(f"No running statement has the query id '{query_id}'; it may have "
                       f"finished already", title="Query not found")
    if local is not None:
        local.cancel()
    elif row is not None and row["backend_id"]:
        source = current_sources().get(row["source"])
        if source is not None:
            cancel_backend(source, row["backend_id"], query_id)
    return {"query_id": query_id, "cancel_requested": True}
