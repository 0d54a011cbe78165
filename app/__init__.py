"""Quarry: an on-prem SQL and machine-learning service speaking the MindsDB REST interface."""

from __future__ import annotations

import logging
import os
import secrets
import select
import time
from typing import Any

from flask import Flask
from flask.sessions import SessionInterface
from sqlalchemy import event
from sqlalchemy.engine import Engine
from sqlalchemy.exc import DisconnectionError

from .api import register_blueprints
from .api.openapi import openapi
from .cli import register_cli
from .config import VERSION, load_settings
from .console import register_console
from .errors import OUTAGE_KEY, StoreOutage, register_error_handlers
from .extensions import db, init_migrations, release_session
from .federation.engine import init_engine
from .federation.spark import init_spark
from .jsonio import JSONProvider
from .kb.stores import check_settings as check_kb_stores
from .malloc import limit_arenas
from .mcp.completions import init_completions
from .mindsdb.runs import init_jobs, start_jobs
from .ops import init_ops
from .security import init_auth
from .services.audit import init_audit
from .services.auth import check_hash_method
from .services.credentials import instance_key
from .services.databases import init_databases
from .services.files import file_tables, remove_stale_parts
from .services.queries import init_queries
from .services.startup import check_store, open_engine_in_worker, open_sources_in_worker
from .services.trainer import init_trainer
from .sql import init_sources
from .sql.files import files_source
from .telemetry import init_metrics

__version__ = VERSION
MAX_JSON_DEPTH_CEILING = 256


def create_app(config: dict[str, Any] | None = None) -> Flask:
    """Build a Quarry app: settings, extensions, blueprints, error handlers, CLI."""
    settings = load_settings()
    settings.update(config or {})
    instance_path = os.path.abspath(settings["INSTANCE_PATH"] or "instance")
    os.makedirs(instance_path, exist_ok=True)
    if not settings["ENCRYPTION_KEY"] and not settings["DATABASE_URL"]:
        # The embedded default keeps its own key beside its store: passwords and API keys
        # work out of the box. A deployment with a store of its own sets its key.
        settings["ENCRYPTION_KEY"] = instance_key(instance_path)

    if not 1 <= settings["MAX_JSON_DEPTH"] <= MAX_JSON_DEPTH_CEILING:
        # Deeper documents would overflow the interpreter's stack in the code that walks
        # them (schemas, secret masking), turning a refusal back into a 500.
        raise RuntimeError(f"QUARRY_MAX_JSON_DEPTH must be between 1 and "
                           f"{MAX_JSON_DEPTH_CEILING}, not {settings['MAX_JSON_DEPTH']}")

    check_kb_stores(settings["KB_STORES"])
    check_hash_method(settings["PASSWORD_HASH"])

    app = Flask(__name__, instance_path=instance_path)
    app.config.update(settings)
    _configure_logging(app)
    if not settings["SECRET_KEY"]:
        if settings["AUTH_REQUIRED"]:
            raise RuntimeError("QUARRY_AUTH_REQUIRED is on but QUARRY_SECRET_KEY is not set: "
                               "sessions could not be signed; set a long random secret key")
        settings["SECRET_KEY"] = secrets.token_hex(32)
    app.config.update(
        SECRET_KEY=settings["SECRET_KEY"],
        SQLALCHEMY_DATABASE_URI=settings["DATABASE_URL"]
        or "sqlite:///" + os.path.join(instance_path, "quarry.db"),
        SQLALCHEMY_ENGINE_OPTIONS=_store_engine_options(settings),
        MAX_CONTENT_LENGTH=settings["MAX_BODY_BYTES"],
        API_TITLE="Quarry",
        API_VERSION=__version__,
        OPENAPI_VERSION="3.0.3",
        OPENAPI_URL_PREFIX="/api",
        OPENAPI_JSON_PATH="openapi.json",
    )
    app.json = JSONProvider(app)
    app.session_interface = NoSessions()

    db.init_app(app)
    # Registered after flask-sqlalchemy's teardown, so it runs before it (Flask runs them
    # in reverse): the session is gone, safely, when flask-sqlalchemy's would remove it.
    app.teardown_appcontext(release_session)
    init_metrics(app)
    registry = init_sources(app)  # data sources (and the demo file) for the SQL endpoint
    # Uploaded files: read by the federation engine; the store lists them.
    registry.add(files_source(app.config, catalog=file_tables))
    init_databases(app, registry)  # ... and those created at run time, kept in the store
    init_migrations(app)
    openapi.init_app(app)
    with app.app_context():
        _tune_store_engine(db.engine)
        # Any statement that succeeds on the store ends an outage (see StoreOutage).
        outage = app.extensions[OUTAGE_KEY] = StoreOutage()
        event.listen(db.engine, "after_cursor_execute", outage.answered)
    register_error_handlers(app)
    # Request id first, then the sign-in guard: a refused request still carries its id.
    init_ops(app)
    init_auth(app)
    init_trainer(app)
    if settings["CELERY_BROKER_URL"]:
        # Only with a broker: the services then queue trainings there. Without one, Celery
        # (~5 MiB in every server process) is loaded only by a Celery worker, through
        # ``wsgi.celery``.
        from .tasks import init_celery

        init_celery(app)
    init_queries(app)
    init_jobs(app)  # the jobs' scheduler: started by a first request or after_fork
    init_engine(app)  # the federation engine; its DuckDB opens with the first such statement
    init_spark(app)  # FEDERATION_ENGINE spark/auto: the Spark Connect address, checked here
    init_audit(app)
    init_completions(app)
    check_store(app)
    remove_stale_parts(app)  # of uploads a process that died left behind
    register_blueprints(app, openapi)
    register_console(app)
    register_cli(app)
    return app


class NoSessions(SessionInterface):
    """Quarry keeps nothing in Flask's session: its sign-in cookie is its own (security.py;
    the same name, another signature). Flask's cookie session built a signing serializer
    and checked the cookie's signature on every request for nothing; here ``session`` is
    Flask's null session (empty; a write raises)."""

    def open_session(self, app: Flask, request: Any) -> Any:
        return self.make_null_session(app)

    def save_session(self, app: Flask, session: Any, response: Any) -> None:
        return None


def _configure_logging(app: Flask) -> None:
    app.logger.setLevel(app.config["LOG_LEVEL"])
    logging.getLogger("app").setLevel(app.config["LOG_LEVEL"])


def _store_engine_options(settings: dict[str, Any]) -> dict[str, Any]:
    url = settings["DATABASE_URL"] or "sqlite://"
    if url.startswith("sqlite"):
        # Writers wait for the lock instead of failing at once under concurrent requests.
        return {"connect_args": {"timeout": 30}}
    # No pre-ping on every checkout: it is a round trip to the store per request (see
    # _ping_when_idle, which pings only connections that sat idle in the pool).
    return {"pool_size": 10, "max_overflow": 10, "pool_timeout": 10}


# A store connection that sat in the pool longer than this is pinged before it is handed
# out. One used within the last second costs no round trip: it is handed out unless its
# socket already has input waiting, which an idle connection never has unless the server
# ended it (a terminated backend sends its FATAL message and closes the socket).
STORE_PING_IDLE_S = 1.0


def _tune_store_engine(engine: Engine) -> None:
    if engine.dialect.name != "sqlite":
        _ping_when_idle(engine)
        return

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection, _record):
        # SQLite leaves foreign keys (and so ON DELETE CASCADE) off unless asked per connection;
        # WAL lets readers go on while one request writes.
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA busy_timeout=30000")
        cursor.close()


def _socket_has_input(dbapi_connection) -> bool:
    """Whether the idle connection's socket is readable (or gone): a poll, no round trip."""
    try:
        fileno = dbapi_connection.fileno()
    except Exception:  # noqa: BLE001 - closed, or a driver without one: treat as suspect
        return True
    poller = select.poll()
    poller.register(fileno, select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))


def _ping_when_idle(engine: Engine) -> None:
    """SQLAlchemy's pessimistic disconnect handling, without a round trip per request.

    ``pool_pre_ping`` pings on every checkout: on a busy host that round trip (and waiting
    for the store's process to be scheduled for it) was a large part of a signed-in
    request's cost. A connection back in the pool within the last second is handed out as
    it is unless the server has already written to (or closed) its socket; an older one, or
    one with input waiting, is pinged, and a dead one replaced (DisconnectionError makes the
    pool connect again).
    """

    @event.listens_for(engine, "checkin")
    def _checked_in(_dbapi_connection, record):
        if record is not None:
            record.info["quarry_idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection, record, _proxy):
        since = record.info.get("quarry_idle_since")
        if since is None:
            return  # a new connection
        if time.monotonic() - since < STORE_PING_IDLE_S and not _socket_has_input(
                dbapi_connection):
            return  # used a moment ago, and the server has said nothing since
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception:  # noqa: BLE001 - any failure: the connection is not usable
            alive = False
        if not alive:
            raise DisconnectionError("store connection lost while idle in the pool")


def after_fork(app: Flask) -> None:
    """In a gunicorn worker forked from a master that built ``app`` (``preload_app``).

    Pooled connections opened in the master (start-up checks) would be shared by every
    worker's socket reads; each worker drops them, without closing the master's, and opens
    its own. Two malloc arenas per worker keep the memory of large results compact. A worker
    started in place of one that died removes the upload parts the dead one left. Where the
    master preloaded the federation engine's modules, the worker opens its engine now, and a
    connection to each data source before it takes a request (``open_sources_in_worker``).
    """
    with app.app_context():
        db.engine.dispose(close=False)
    limit_arenas(2)
    remove_stale_parts(app)
    open_engine_in_worker(app)
    open_sources_in_worker(app)
    start_jobs(app)
