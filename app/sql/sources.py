"""The registry of named data sources: one connection pool per source, built in the factory.

A data source is a SQLAlchemy URL (SQLite, PostgreSQL through psycopg 3, MySQL/MariaDB
through PyMySQL). The pools hand out raw DBAPI connections: execution (``execute.py``) talks
to the driver directly so that it controls the transaction, the time limit and the fetch.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import select
import sqlite3
import ssl
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from flask import Flask, current_app, has_app_context
from sqlalchemy import create_engine, event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url
from sqlalchemy.pool import QueuePool

from ..lru import LruCache
from ..rules.names import DEFAULT_PROJECT, SYSTEM_DATABASE
from ..telemetry import EXTENSION_KEY as METRICS_KEY
from ..telemetry import current_metrics
from .demo import ensure_demo
from .errors import ErrorCode, SqlError
from .functions import FunctionPolicy, policy_for
from .functions.sqlite import SQLITE_FUNCTIONS
from .roles import PRIVILEGED_ROLE_MODES, RoleReport, check_account, refuse_at_start

log = logging.getLogger(__name__)

EXTENSION_KEY = "quarry.sources"
DEMO_NAME = "demo"
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$")
RESERVED_NAMES = (DEFAULT_PROJECT, SYSTEM_DATABASE)

# SQLAlchemy backend name -> (our dialect, sqlglot dialect, driver forced into the URL).
_BACKENDS = {
    "sqlite": ("sqlite", "sqlite", None),
    "postgresql": ("postgresql", "postgres", "psycopg"),
    "postgres": ("postgresql", "postgres", "psycopg"),
    "mysql": ("mysql", "mysql", "pymysql"),
    "mariadb": ("mysql", "mysql", "pymysql"),
}

# SQLite authorizer: reads, and calls of the built-in functions on the allow-list only.
# mode=ro alone still lets ATTACH create and write other files, and PRAGMA query_only can be
# switched off by the caller.
_SQLITE_ALLOWED = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_FUNCTION,
                   getattr(sqlite3, "SQLITE_RECURSIVE", 33)}


def _sqlite_authorizer(action: int, arg1: str | None, arg2: str | None, _db: str | None,
                       _source: str | None) -> int:
    if action not in _SQLITE_ALLOWED:
        return sqlite3.SQLITE_DENY
    if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in SQLITE_FUNCTIONS:
        return sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_OK


def open_sqlite_readonly(path: str | None, max_value_bytes: int | None = None
                         ) -> sqlite3.Connection:
    """A SQLite connection that can only read: opened mode=ro, with the read-only authorizer."""
    if path in (None, "", ":memory:"):
        conn = sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None)
    else:
        uri = "file:" + quote(os.path.abspath(path)) + "?mode=ro"
        conn = sqlite3.connect(uri, uri=True, check_same_thread=False, isolation_level=None)
    conn.set_authorizer(_sqlite_authorizer)
    if max_value_bytes:
        # No single value may outgrow the response limit: zeroblob(1e9) or a huge printf()
        # fails at once ("string or blob too big") instead of filling the worker's memory.
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, max_value_bytes)
    return conn


@dataclass
class DataSource:
    """One named data source and its pool."""

    name: str
    dialect: str                   # sqlite | postgresql | mysql
    sqlglot_dialect: str
    timeout_s: float
    max_rows: int
    connect: Callable[[], Any]     # -> a pooled DBAPI connection (close() returns it)
    dispose: Callable[[], None]
    engine_name: str = ""          # what SHOW DATABASES calls the engine
    info: dict[str, Any] = field(default_factory=dict)
    functions: FunctionPolicy = field(default=None)  # type: ignore[assignment]
    # Any signed-in user may query a public source; others need a grant (services/access).
    public: bool = False
    # Options of the DATA_SOURCES entry (docs/sql.md): functions allowed beyond the
    # built-in allow-list (PostgreSQL), and what a privileged account means (roles.py).
    allow_functions: frozenset[str] = frozenset()
    privileged_role: str = "warn"
    role: RoleReport | None = None  # None: not checked yet (or SQLite: no accounts)
    # A source with no connection of its own, read only by the federation engine
    # (federation/route.py): uploaded files.
    engine_only: bool = False
    # The tables of a source that lists them itself instead of asking a catalog (uploaded
    # files: the store knows them), each {name, columns: [{name, type}]}; wired by the app.
    catalog: Callable[[], list[dict[str, Any]]] | None = None

    def __post_init__(self) -> None:
        if self.functions is None:
            self.functions = policy_for(self.dialect)
        self.functions.bind(self)


class SourceRegistry:
    """Named data sources; names are matched case-insensitively."""

    def __init__(self) -> None:
        self._sources: dict[str, DataSource] = {}
        self.constants: DataSource | None = None  # table-less SELECTs run here
        # Gated statements: dashboards repeat their queries.
        self.gate_cache: LruCache[tuple, Any] = LruCache(1024)
        # Sources created at run time and kept in the store (runtime.py); wired by the factory.
        self.runtime: Any = None

    def add(self, source: DataSource) -> None:
        self._sources[source.name.lower()] = source

    def get(self, name: str) -> DataSource | None:
        source = self._sources.get(name.lower())
        if source is None and self.runtime is not None:
            return self.runtime.get(name)
        return source

    def is_configured(self, name: str) -> bool:
        """Whether ``name`` is a configured source (QUARRY_DATA_SOURCES or demo)."""
        return name.lower() in self._sources

    def attach_runtime(self, runtime: Any) -> None:
        """Serve the runtime sources too; a change to them empties the gate's cache."""
        self.runtime = runtime
        runtime.on_change = self.forget_gated

    def forget_gated(self) -> None:
        # Cached gated statements hold their DataSource: a replaced source must not be used.
        self.gate_cache = LruCache(1024)

    def _runtime_pairs(self) -> list[tuple[str, str]]:
        """(name, engine) of the runtime sources that no configured source shadows."""
        if self.runtime is None:
            return []
        return [(s.name, s.engine) for s in self.runtime.stored()
                if s.name.lower() not in self._sources]

    def require(self, name: str) -> DataSource:
        source = self.get(name)
        if source is None:
            raise unknown_source(name, self.names())
        return source

    def names(self) -> list[str]:
        return sorted([*(s.name for s in self._sources.values()),
                       *(name for name, _ in self._runtime_pairs())])

    def sources(self) -> list[DataSource]:
        """Every configured data source, by name."""
        return sorted(self._sources.values(), key=lambda s: s.name)

    def dialects(self) -> list[str]:
        """The sqlglot dialects of the data sources, each once."""
        dialects = {s.sqlglot_dialect for s in self._sources.values()}
        # Runtime sources are not built before their first use: their dialect by engine.
        dialects |= {engine if engine in ("postgres", "sqlite") else "mysql"
                     for _, engine in self._runtime_pairs()}
        return sorted(dialects)

    def describe(self) -> list[tuple[str, str]]:
        """(name, engine) of every data source, e.g. ("demo", "sqlite")."""
        pairs = [(s.name, s.engine_name) for s in self._sources.values()]
        return sorted(pairs + self._runtime_pairs())

    def dispose(self) -> None:
        """Close every pooled connection (idempotent)."""
        for source in [*self._sources.values(), self.constants]:
            if source is not None:
                source.dispose()
        if self.runtime is not None:
            self.runtime.dispose()


def unknown_source(name: str, known: list[str]) -> SqlError:
    """The one answer to a name that is no data source (of those the caller may see)."""
    return SqlError(ErrorCode.UNKNOWN_SOURCE,
                    f"Data source '{name}' does not exist; configured data sources: "
                    + (", ".join(known) or "none"))


class VisibleSources:
    """A registry as one caller sees it: the sources ``hidden`` names do not exist.

    A source the caller may not query must answer exactly as a source that does not exist
    (its name must not leak): resolving names through this view, the gate, the prediction
    JOIN, the training query and the skills' checks all take the path of a missing name,
    with their own messages, which list only the names the caller may see. Everything else
    is the registry's. Gated statements are cached in the registry's cache under the set of
    hidden names, so callers with the same view share them.
    """

    def __init__(self, registry: SourceRegistry, hidden: frozenset[str]) -> None:
        self._registry = registry
        self._hidden = hidden  # lower-cased names
        self.constants = registry.constants
        self.runtime = registry.runtime

    @property
    def gate_cache(self) -> _SaltedCache:
        return _SaltedCache(self._registry.gate_cache, self._hidden)

    def visible(self, name: str) -> bool:
        return name.lower() not in self._hidden

    def get(self, name: str) -> DataSource | None:
        return self._registry.get(name) if self.visible(name) else None

    def is_configured(self, name: str) -> bool:
        return self.visible(name) and self._registry.is_configured(name)

    def require(self, name: str) -> DataSource:
        source = self.get(name)
        if source is None:
            raise unknown_source(name, self.names())
        return source

    def names(self) -> list[str]:
        return [n for n in self._registry.names() if self.visible(n)]

    def sources(self) -> list[DataSource]:
        return [s for s in self._registry.sources() if self.visible(s.name)]

    def describe(self) -> list[tuple[str, str]]:
        return [(n, e) for n, e in self._registry.describe() if self.visible(n)]

    def dialects(self) -> list[str]:
        return self._registry.dialects()

    def forget_gated(self) -> None:
        self._registry.forget_gated()


class _SaltedCache:
    """The registry's gate cache, keyed by one view's hidden names as well."""

    def __init__(self, cache: LruCache, salt: frozenset[str]) -> None:
        self._cache, self._salt = cache, salt

    def get(self, key: Any) -> Any:
        return self._cache.get((self._salt, key))

    def put(self, key: Any, value: Any) -> None:
        self._cache.put((self._salt, key), value)


def _count_pool_use(target: Any, name: str) -> None:
    """Keep the pool-usage gauge of source ``name`` as connections go out and come back."""

    def change(step: int) -> None:
        if has_app_context() and METRICS_KEY in current_app.extensions:
            metrics = current_metrics()
            metrics.series(metrics.pool_in_use, name or "(no source)").inc(step)

    event.listen(target, "checkout", lambda *_: change(1))
    event.listen(target, "checkin", lambda *_: change(-1))


def _sqlite_source(name: str, path: str | None, settings: dict[str, Any], timeout_s: float,
                   max_rows: int) -> DataSource:
    limit = settings["SQL_MAX_RESPONSE_BYTES"]
    pool = QueuePool(lambda: open_sqlite_readonly(path, limit), pool_size=settings["SQL_POOL_SIZE"],
                     max_overflow=0, timeout=settings["SQL_POOL_TIMEOUT_S"],
                     reset_on_return=None)
    _count_pool_use(pool, name)
    return DataSource(name=name, dialect="sqlite", sqlglot_dialect="sqlite",
                      timeout_s=timeout_s, max_rows=max_rows, connect=pool.connect,
                      dispose=pool.dispose, engine_name="sqlite", info={"path": path})


def _server_source(name: str, url: Any, dialect: str, glot: str, settings: dict[str, Any],
                   timeout_s: float, max_rows: int) -> DataSource:
    # A server that does not answer must not hold a request longer than the pool wait; the
    # source's own connect_timeout may only shorten that.
    connect_timeout = max(2, int(settings["SQL_POOL_TIMEOUT_S"]))
    asked = url.query.get("connect_timeout")
    if isinstance(asked, str) and asked.isdigit():
        connect_timeout = min(connect_timeout, max(1, int(asked)))
    url = url.difference_update_query(["connect_timeout"])
    engine = create_engine(
        url, pool_size=settings["SQL_POOL_SIZE"], max_overflow=0,
        pool_timeout=settings["SQL_POOL_TIMEOUT_S"],
        connect_args={"connect_timeout": connect_timeout},
    )

    @event.listens_for(engine, "checkout")
    def _closed_by_the_server(dbapi_connection, _record, _proxy):
        # In place of SQLAlchemy's pre-ping, which costs a round trip per request (a fifth
        # of a statement's). The pool then opens another connection (sources.py has no
        # other checkout listener before this one, so the pool's use is counted once).
        if _looks_closed(dbapi_connection, dialect):
            raise sa_exc.DisconnectionError("the server closed the connection")

    if dialect == "postgresql":
        @event.listens_for(engine, "connect")
        def _autocommit(dbapi_connection, _record):
            # execute.py opens each READ ONLY transaction itself and always rolls it back.
            dbapi_connection.autocommit = True
            # psycopg prepares a statement it has run five times (ROLLBACK is one), and
            # DISCARD ALL below drops prepared statements on the server behind its back.
            dbapi_connection.prepare_threshold = None
            _lenient_pg_loaders(dbapi_connection)

        @event.listens_for(engine, "reset")
        def _discard_session(dbapi_connection, _record, _reset_state):
            # No session state outlives a request: a rollback leaves session advisory
            # locks, prepared statements, settings and temporary objects in place, so the
            # next request on this pooled connection would inherit them. DISCARD ALL cannot
            # run inside a transaction: the request's READ ONLY transaction (execute.py
            # leaves it to this) is rolled back first, both in one round trip (a pipeline
            # syncs after each). Should it fail, the pool drops the connection instead of
            # reusing it.
            if dbapi_connection.closed:
                return
            from psycopg.pq import TransactionStatus

            with dbapi_connection.pipeline():
                if dbapi_connection.info.transaction_status != TransactionStatus.IDLE:
                    dbapi_connection.execute("ROLLBACK", prepare=False)
                dbapi_connection.execute("DISCARD ALL", prepare=False)

    if dialect == "mysql":
        @event.listens_for(engine, "do_connect")
        def _shared_tls(_dialect, _record, cargs, cparams):
            return mysql_connection_class()(*cargs, **cparams)

    _count_pool_use(engine, name)
    return DataSource(name=name, dialect=dialect, sqlglot_dialect=glot, timeout_s=timeout_s,
                      max_rows=max_rows, connect=engine.raw_connection, dispose=engine.dispose,
                      engine_name=dialect, info={"url": url.render_as_string()})


@functools.cache
def default_tls_context() -> ssl.SSLContext:
    """PyMySQL's TLS context for a connection given no TLS option (TLS when the server
    offers it, its certificate not checked), made once per process (``preload_engine``
    makes it in the gunicorn master, before the fork). PyMySQL makes a new one for each
    connection, loading the system's CA certificates again: 80-105 ms of CPU a connection
    on this machine, as much as the rest of a worker's start-up to a MariaDB source."""
    import pymysql.connections

    return pymysql.connections.Connection._create_ssl_ctx(None, {})


@functools.cache
def mysql_connection_class() -> type:
    """PyMySQL's connection, with the default TLS context shared (``default_tls_context``);
    TLS options given in the source's URL make their own context, as PyMySQL does."""
    import pymysql.connections

    class Connection(pymysql.connections.Connection):
        def _create_ssl_ctx(self, sslp: Any) -> ssl.SSLContext:
            if sslp:
                return super()._create_ssl_ctx(sslp)
            return default_tls_context()

    return Connection


def _looks_closed(dbapi_connection: Any, dialect: str) -> bool:
    """Whether the server closed this idle pooled connection (a restart, a terminated
    backend, an idle timeout), without a round trip.

    An idle connection of the pool has nothing to read: the server sends nothing unasked
    (Quarry never LISTENs). A socket that is readable has the server's goodbye (an error
    message, or the end of the stream) waiting. A connection cut without a word (a network
    that drops packets) is not seen here; its statement then fails as SOURCE_DOWN and the
    connection is dropped (execute.failure).
    """
    try:
        if dialect == "postgresql":
            if dbapi_connection.closed or dbapi_connection.broken:
                return True
            fd = dbapi_connection.fileno()
        else:
            sock = dbapi_connection._sock  # PyMySQL keeps no public handle of it
            if sock is None:
                return True
            fd = sock.fileno()
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI)
        return bool(poller.poll(0))
    except (OSError, ValueError, AttributeError):
        return True


# PostgreSQL values that Python's date/datetime/timedelta cannot hold ('infinity',
# '-infinity', years BC or after 9999, intervals over 999 999 999 days): psycopg raises while
# fetching, which would fail the whole statement. They are answered as their text instead.
_PG_LENIENT_TYPES = ("date", "timestamp", "timestamptz", "interval")


def _lenient_pg_loaders(conn: Any) -> None:
    import psycopg
    from psycopg.adapt import Loader

    text = psycopg.pq.Format.TEXT
    for type_name in _PG_LENIENT_TYPES:
        info = conn.adapters.types.get(type_name)
        fast = conn.adapters.get_loader(info.oid, text) if info is not None else None
        if fast is None:
            continue

        class _Lenient(Loader):
            _fast_class = fast

            def __init__(self, oid: int, context: Any = None) -> None:
                super().__init__(oid, context)
                self._fast = self._fast_class(oid, context)

            def load(self, data: Any) -> Any:
                try:
                    return self._fast.load(data)
                except psycopg.DataError:
                    return bytes(data).decode("utf-8", "replace")

        conn.adapters.register_loader(info.oid, _Lenient)


def build_source(name: str, spec: Any, settings: dict[str, Any]) -> DataSource:
    """A DataSource from one DATA_SOURCES entry: a URL, or {url, timeout_s, max_rows,
    privileged_role, allow_functions}."""
    if not _NAME_RE.match(name):
        raise RuntimeError(f"QUARRY_DATA_SOURCES: '{name}' is not a valid data source name")
    if name.lower() in RESERVED_NAMES:
        # Data sources and projects share SQL's one name space of databases (SHOW DATABASES).
        raise RuntimeError(f"QUARRY_DATA_SOURCES: '{name}' is reserved (the default project "
                           f"{DEFAULT_PROJECT}, and {SYSTEM_DATABASE}); choose another name")
    if isinstance(spec, str):
        spec = {"url": spec}
    if not isinstance(spec, dict) or not isinstance(spec.get("url"), str):
        raise RuntimeError(f"QUARRY_DATA_SOURCES['{name}'] must be a URL or an object "
                           f"with a url")
    timeout_s = float(spec.get("timeout_s") or settings["SQL_TIMEOUT_S"])
    max_rows = int(spec.get("max_rows") or settings["SQL_MAX_ROWS"])
    url = make_url(spec["url"])
    backend = url.get_backend_name()
    if backend not in _BACKENDS:
        raise RuntimeError(f"QUARRY_DATA_SOURCES['{name}']: unsupported database '{backend}' "
                           f"(supported: sqlite, postgresql, mysql, mariadb)")
    public = spec.get("public", False)
    if not isinstance(public, bool):
        raise RuntimeError(f"QUARRY_DATA_SOURCES['{name}']: public must be true or false")
    dialect, glot, driver = _BACKENDS[backend]
    privileged_role, allow_functions = _source_options(name, spec)
    if dialect == "sqlite":
        source = _sqlite_source(name, url.database, settings, timeout_s, max_rows)
    else:
        url = url.set(drivername=f"{'postgresql' if dialect == 'postgresql' else backend}"
                                 f"+{driver}")
        source = _server_source(name, url, dialect, glot, settings, timeout_s, max_rows)
        source.engine_name = backend if backend != "postgres" else "postgresql"
        source.privileged_role = privileged_role
        source.allow_functions = allow_functions
    source.public = public
    return source


def _source_options(name: str, spec: dict[str, Any]) -> tuple[str, frozenset[str]]:
    """The checked ``privileged_role`` and ``allow_functions`` of a DATA_SOURCES entry."""
    mode = spec.get("privileged_role", "warn")
    if mode not in PRIVILEGED_ROLE_MODES:
        raise RuntimeError(f"QUARRY_DATA_SOURCES['{name}']: privileged_role must be one of "
                           f"{', '.join(PRIVILEGED_ROLE_MODES)}, not {mode!r}")
    allowed = spec.get("allow_functions", [])
    if not isinstance(allowed, list) or not all(
            isinstance(f, str) and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_$]*", f) for f in allowed):
        raise RuntimeError(f"QUARRY_DATA_SOURCES['{name}']: allow_functions must be a list "
                           f"of function names (without schema or arguments)")
    return mode, frozenset(f.lower() for f in allowed)


def demo_path(app: Flask) -> str:
    return app.config.get("DEMO_PATH") or os.path.join(app.instance_path, "demo.db")


def init_sources(app: Flask) -> SourceRegistry:
    """Build the registry from DATA_SOURCES (+ the demo source) into app.extensions."""
    settings = app.config
    configured = settings.get("DATA_SOURCES") or {}
    if not isinstance(configured, dict):
        raise RuntimeError("QUARRY_DATA_SOURCES must be a JSON object: name -> url")
    # sqlglot logs a warning for every statement it parses as a bare Command; the gate
    # refuses those anyway, with its own message.
    logging.getLogger("sqlglot").setLevel(logging.ERROR)
    registry = SourceRegistry()
    for name, spec in configured.items():
        registry.add(build_source(name, spec, settings))
    if settings.get("DEMO_SOURCE") and registry.get(DEMO_NAME) is None:
        path = ensure_demo(demo_path(app))
        demo = _sqlite_source(DEMO_NAME, path, settings, settings["SQL_TIMEOUT_S"],
                              settings["SQL_MAX_ROWS"])
        demo.public = True  # sample data: every signed-in user may query it
        registry.add(demo)
    registry.constants = _sqlite_source("", None, settings, settings["SQL_TIMEOUT_S"],
                                        settings["SQL_MAX_ROWS"])
    try:
        for source in registry.sources():
            _first_contact(source)
            refuse_at_start(source)  # a privileged account with privileged_role "refuse"
    except RuntimeError:
        registry.dispose()
        raise
    app.extensions[EXTENSION_KEY] = registry
    # Pools close with the app (tests build many apps) and at interpreter exit.
    weakref.finalize(app, registry.dispose)
    return registry


def _first_contact(source: DataSource) -> None:
    """At start, over one connection: check the account (``roles.py``) and read what the
    function policy needs (PostgreSQL's catalog). A source that cannot be reached is not an
    error: both happen on its first statement instead. The connection is closed again, so
    that no pooled connection outlives gunicorn's master into its forked workers."""
    if source.dialect == "sqlite":
        return
    try:
        conn = source.connect()
        try:
            check_account(source, conn.driver_connection)
            source.functions.warm(conn.driver_connection)
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - any failure: leave it for the first statement
        text = str(exc).strip()
        log.info("Data source '%s' cannot be checked at start (%s); its account and "
                 "functions are checked on its first statement", source.name,
                 text.splitlines()[0] if text else type(exc).__name__)
    finally:
        source.dispose()


def current_sources() -> SourceRegistry:
    return current_app.extensions[EXTENSION_KEY]


def data_source_names() -> list[str]:
    """Names of the data sources of the current app (for SHOW DATABASES)."""
    return current_sources().names()
