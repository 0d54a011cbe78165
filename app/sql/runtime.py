"""Data sources created at run time (``CREATE DATABASE``, ``POST /api/databases``).

They are kept in the metadata store; this module is the data path's side of them and never
touches the store itself: the app factory gives it two callables that read the store.

- ``ENGINES`` says which MindsDB engine names are served and which connection parameters
  each takes (an allow-list: an unknown parameter is refused, never passed to a driver).
- ``source_url`` turns an engine and its parameters into the SQLAlchemy URL that
  ``sources.build_source`` — the same builder as for ``QUARRY_DATA_SOURCES`` — opens, so the
  read-only layers, the function allow-list, time limits, row caps and pools are the same.
- ``RuntimeSources`` is the per-process view of the stored sources: built lazily (no
  connection before the first query), checked against the store's catalog version once per
  request that uses it (one small read; the list itself is read again only when the version
  moved), and a source's pool is disposed as soon as its row changes or disappears, so that
  a change made through one worker or instance is seen by the next request on every other.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from flask import g, has_app_context
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError

from ..errors import store_error_line
from .roles import RoleReport
from .sources import DataSource, build_source

log = logging.getLogger(__name__)

# Where a request (an app context) notes which RuntimeSources it has checked already.
_CHECKED_KEY = "_quarry_catalog_checked"
_UNREAD = object()


@dataclass(frozen=True)
class Parameter:
    name: str
    kind: type                      # str, int, bool or dict (of ``fields``)
    required: bool = False
    default: Any = None
    choices: tuple[str, ...] = ()   # allowed values, when a closed set
    pattern: str | None = None      # a regular expression a str value must match
    secret: bool = False            # encrypted at rest, masked on every read
    limits: tuple[int, int] = (1, 65535)  # an int's smallest and largest value
    fields: tuple[Parameter, ...] = ()    # a dict's keys
    # Known to MindsDB's handler but of no use to Quarry (MindsDB's tests send "type", a
    # read-only source has no "autocommit"): accepted, never checked, stored or used.
    ignored: bool = False


_HOST = r"[A-Za-z0-9_.:\[\]%-]{1,255}"
_SQL_NAME = r"[A-Za-z_][A-Za-z0-9_$]{0,62}"
_SSL_MODES = ("disable", "allow", "prefer", "require", "verify-ca", "verify-full")
_PATH = r"[^\x00]{1,1024}"

_SERVER_COMMON = (
    Parameter("host", str, required=True, pattern=_HOST),
    Parameter("database", str, required=True),
    Parameter("user", str, required=True),
    Parameter("password", str, secret=True),
    # Seconds to wait for the server's answer when connecting; never longer than
    # QUARRY_SQL_POOL_TIMEOUT_S (sources.py), which bounds it anyway.
    Parameter("connect_timeout", int, limits=(1, 3600)),
    Parameter("type", str, ignored=True),
)
_SSL_MODE = Parameter("sslmode", str, choices=_SSL_MODES)
_CONNECT_TIMEOUT = Parameter("connect_timeout", int, limits=(1, 3600))
_MYSQL = (*_SERVER_COMMON, Parameter("port", int, default=3306),
          # A URL (mysql://user:password@host:port/database) in place of those five.
          Parameter("url", str, secret=True),
          # TLS: ssl true requires it, false refuses it; the files are paths on Quarry's host.
          Parameter("ssl", bool), Parameter("ssl_ca", str, pattern=_PATH),
          Parameter("ssl_cert", str, pattern=_PATH), Parameter("ssl_key", str, pattern=_PATH))

# engine -> (backend of the URL, its parameters): the connection arguments of MindsDB's
# handlers (mindsdb/integrations/handlers/<engine>_handler/connection_args.py), with their
# names. This is the one allow-list: any other key is refused, naming these.
ENGINES: dict[str, tuple[str, tuple[Parameter, ...]]] = {
    "postgres": ("postgresql", (
        *_SERVER_COMMON, Parameter("port", int, default=5432),
        Parameter("schema", str, pattern=_SQL_NAME), _SSL_MODE,
        # libpq keywords, as MindsDB passes them: only those that change nothing but the
        # connection's wait and its security (no file, service or host of libpq's own).
        Parameter("connection_parameters", dict, fields=(
            _CONNECT_TIMEOUT, _SSL_MODE,
            Parameter("application_name", str, pattern=r"[A-Za-z0-9_. -]{1,63}"))),
        Parameter("autocommit", bool, ignored=True))),
    "mysql": ("mysql", _MYSQL),
    "mariadb": ("mariadb", _MYSQL),
    "sqlite": ("sqlite", (Parameter("db_file", str, required=True),
                          Parameter("type", str, ignored=True))),
}
# Other spellings a MindsDB script may use for the same engines.
ENGINE_ALIASES = {"postgresql": "postgres"}
_URL_PARTS = {"host": "host", "port": "port", "username": "user", "password": "password",
              "database": "database"}


def engine_name(engine: str) -> str | None:
    """The canonical name of ``engine`` (case-insensitive), or None when not served."""
    key = engine.strip().lower()
    key = ENGINE_ALIASES.get(key, key)
    return key if key in ENGINES else None


def engine_parameters(engine: str) -> tuple[Parameter, ...]:
    return ENGINES[engine][1]


def _with_url(params: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """``params`` with the parts of its ``url`` (MySQL, MariaDB) in place of the url, which
    wins over the separate keys as in MindsDB; and what is wrong with the url, if anything."""
    url = params.get("url")
    if url is None:
        return params, None
    rest = {k: v for k, v in params.items() if k != "url"}
    if not isinstance(url, str):
        return rest, "Not a valid string."
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):
        return rest, "Not a valid URL (mysql://user:password@host:port/database)."
    if parsed.get_backend_name() not in ("mysql", "mariadb") or parsed.query:
        return rest, "Not a MySQL URL (mysql://user:password@host:port/database)."
    for part, key in _URL_PARTS.items():
        if getattr(parsed, part) is not None:
            rest[key] = getattr(parsed, part)
    return rest, None


def parameter_problems(engine: str, params: dict[str, Any]) -> dict[str, str]:
    """{parameter: what is wrong with it} for ``params`` of canonical ``engine``; {} if none."""
    params, url_problem = _with_url(params)
    problems = {"url": url_problem} if url_problem else {}
    problems.update(_problems(engine_parameters(engine), params, f"engine {engine!r}"))
    return problems


def _problems(spec: tuple[Parameter, ...], params: dict[str, Any], owner: str
              ) -> dict[str, str]:
    allowed = {p.name: p for p in spec}
    problems: dict[str, str] = {}
    for key in params:
        if key not in allowed:
            problems[key] = (f"Unknown parameter for {owner}; allowed: "
                             f"{', '.join(allowed)}.")
    for parameter in allowed.values():
        value = params.get(parameter.name)
        if parameter.ignored:
            continue
        if value is None:
            if parameter.required:
                problems[parameter.name] = f"Missing parameter, required by {owner}."
            continue
        if parameter.kind is dict:
            if not isinstance(value, dict):
                problems[parameter.name] = "Not a valid mapping type."
                continue
            inner = _problems(parameter.fields, value, parameter.name)
            problems.update({f"{parameter.name}.{k}": m for k, m in inner.items()})
            continue
        problem = _value_problem(parameter, value)
        if problem:
            problems[parameter.name] = problem
    return problems


def _value_problem(parameter: Parameter, value: Any) -> str | None:
    if parameter.kind is bool:
        return None if _boolean(value) is not None else "Not a valid boolean."
    if parameter.kind is int:
        # JSON numbers or all-digit strings: MindsDB examples write the port both ways.
        if isinstance(value, bool) or not isinstance(value, int | str):
            return "Not a valid integer."
        if isinstance(value, str) and not (value.isascii() and value.isdigit()):
            return "Not a valid integer."
        low, high = parameter.limits
        if not low <= int(value) <= high:
            return f"Must be between {low} and {high}."
        return None
    if not isinstance(value, str):
        return "Not a valid string."
    if not value and parameter.required:
        return "Must not be empty."
    if len(value) > 1024 or "\x00" in value:
        return "Not a valid value (too long, or a NUL character)."
    if parameter.choices and value not in parameter.choices:
        return f"Must be one of: {', '.join(parameter.choices)}."
    if parameter.pattern and not re.fullmatch(parameter.pattern, value):
        return "Not a valid value."
    return None


def _boolean(value: Any) -> bool | None:
    """A JSON boolean, or its text as a SQL statement may write it; None when neither."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def normalised(engine: str, params: dict[str, Any]) -> dict[str, Any]:
    """Valid ``params`` with defaults filled in, integers and booleans as such, the url in
    its parts and the ignored keys left out."""
    params, _ = _with_url(params)
    return _normalised(engine_parameters(engine), params)


def _normalised(spec: tuple[Parameter, ...], params: dict[str, Any]) -> dict[str, Any]:
    values = {}
    for parameter in spec:
        value = params.get(parameter.name, parameter.default)
        if value is None or parameter.ignored:
            continue
        if parameter.kind is dict:
            value = _normalised(parameter.fields, value)
        elif parameter.kind is int:
            value = int(value)
        elif parameter.kind is bool:
            value = _boolean(value)
        values[parameter.name] = value
    return values


def source_url(engine: str, params: dict[str, Any]) -> str:
    """The SQLAlchemy URL of valid, normalised ``params`` (with the password: keep it secret)."""
    backend = ENGINES[engine][0]
    if backend == "sqlite":
        return str(URL.create("sqlite", database=params["db_file"]))
    query = _postgres_query(params) if backend == "postgresql" else _mysql_query(params)
    if params.get("connect_timeout"):
        query["connect_timeout"] = str(params["connect_timeout"])
    url = URL.create(backend, username=params["user"], password=params.get("password"),
                     host=params["host"], port=params["port"], database=params["database"],
                     query=query)
    return url.render_as_string(hide_password=False)


def _postgres_query(params: dict[str, Any]) -> dict[str, str]:
    # libpq's keywords of connection_parameters first: the named parameters win over them.
    query = {k: str(v) for k, v in (params.get("connection_parameters") or {}).items()}
    if params.get("sslmode"):
        query["sslmode"] = params["sslmode"]
    if params.get("schema"):
        # The schema bare table names resolve in (MindsDB's postgres handler does the same).
        query["options"] = f"-csearch_path={params['schema']}"
    return query


def _mysql_query(params: dict[str, Any]) -> dict[str, str]:
    """PyMySQL's TLS options, through SQLAlchemy's URL keys (``ssl_*`` make its ssl dict)."""
    query = {key: params[key] for key in ("ssl_ca", "ssl_cert", "ssl_key") if params.get(key)}
    if params.get("ssl") is True and not query:
        # TLS without a CA file to check the server against (MySQL's "REQUIRED"): any key of
        # the ssl dict turns TLS on in PyMySQL, and there is no host name to check.
        query["ssl_check_hostname"] = "false"
    elif params.get("ssl") is False:
        query = {"ssl_disabled": "true"}
    return query


@dataclass(frozen=True)
class StoredSource:
    """What the store says about one runtime source, without its secrets."""

    name: str
    engine: str
    version: Any                    # changes whenever the row does (id, row version)


@dataclass(frozen=True)
class SourceSpec:
    """Everything needed to build one runtime source (secrets decrypted)."""

    name: str
    engine: str
    params: dict[str, Any]          # in clear: never log it
    shown: dict[str, Any]           # the parameters with secrets masked
    broken: str | None = None       # why it cannot be used (e.g. undecryptable secrets)
    public: bool = False            # any signed-in user may query it
    privileged_role: str = "warn"   # what a privileged account means (roles.py)
    role_warnings: tuple[str, ...] | None = None  # the stored account check; None: unknown


def build_runtime_source(spec: SourceSpec, settings: dict[str, Any]) -> DataSource:
    """A DataSource for ``spec`` through the builder of the configured sources."""
    if spec.broken is not None:
        return _broken_source(spec, settings)
    url = source_url(spec.engine, normalised(spec.engine, spec.params))
    source = build_source(spec.name, {"url": url, "public": spec.public,
                                      "privileged_role": spec.privileged_role}, settings)
    source.engine_name = spec.engine
    source.info = {"parameters": spec.shown, "runtime": True}
    if spec.role_warnings is not None and source.dialect != "sqlite":
        source.role = RoleReport(tuple(spec.role_warnings))  # checked when it was stored
    return source


def _broken_source(spec: SourceSpec, settings: dict[str, Any]) -> DataSource:
    backend = ENGINES[spec.engine][0]
    dialect = {"postgresql": "postgresql", "sqlite": "sqlite"}.get(backend, "mysql")
    glot = {"postgresql": "postgres"}.get(dialect, dialect)
    reason = spec.broken

    def refuse() -> Any:
        raise RuntimeError(reason)

    return DataSource(name=spec.name, dialect=dialect, sqlglot_dialect=glot,
                      timeout_s=settings["SQL_TIMEOUT_S"], max_rows=settings["SQL_MAX_ROWS"],
                      connect=refuse, dispose=lambda: None, engine_name=spec.engine,
                      info={"parameters": spec.shown, "runtime": True})


@dataclass
class RuntimeSources:
    """The runtime sources of one process, kept in step with the store.

    ``read_version`` reads the store's catalog version of the data sources (one row by its
    key; any value, compared for equality: it changes in the same transaction as every
    change of a stored source). ``list_stored`` reads {name key: StoredSource} (one cheap
    query, no decryption); ``load`` reads one source's SourceSpec (decrypting its secrets)
    or None when it is gone. ``on_change`` runs after any source was added, changed or
    removed (the gate's cache holds DataSource objects and must forget them).

    The version is read once per request (per app context; always outside one) before the
    first use of a runtime source: a timer would let the next request miss what the last one
    created, changed or dropped through another worker.
    """

    read_version: Callable[[], Any]
    list_stored: Callable[[], dict[str, StoredSource]]
    load: Callable[[str], SourceSpec | None]
    settings: dict[str, Any] = field(repr=False)  # holds keys: never printed
    on_change: Callable[[], None] = lambda: None
    _version: Any = _UNREAD
    _stored: dict[str, StoredSource] = field(default_factory=dict)
    _built: dict[str, tuple[Any, DataSource]] = field(default_factory=dict)
    _lock: threading.RLock = field(default_factory=threading.RLock)

    def get(self, name: str) -> DataSource | None:
        """The source named ``name`` (built on first use), or None."""
        key = name.lower()
        self.refresh()
        stored = self._stored.get(key)
        if stored is None:
            return None
        built = self._built.get(key)
        if built is not None and built[0] == stored.version:
            return built[1]
        with self._lock:
            return self._build(key, stored)

    def stored(self) -> list[StoredSource]:
        self.refresh()
        return sorted(self._stored.values(), key=lambda s: s.name)

    def refresh(self, *, force: bool = False) -> None:
        """Read the store's list again when its version moved since the last read (checked
        once per request), or when forced."""
        if not force and self._checked_in_this_request():
            return
        try:
            version = self.read_version()
            if not force and version == self._version:
                return
            with self._lock:
                if not force and version == self._version:
                    return  # another thread read the new list while this one waited
                # Read after the version: a change committed in between is seen now, and
                # again (harmlessly) by the next request, whose version then differs.
                stored = self.list_stored()
                self._version = version
                if stored == self._stored:
                    return
                for key, (built_version, source) in list(self._built.items()):
                    if key not in stored or stored[key].version != built_version:
                        del self._built[key]
                        _dispose_quietly(source)
                self._stored = stored
        except Exception as error:  # noqa: BLE001 - the store is down: keep what is known
            # One line: the request that meets the outage logs its traceback (errors.py).
            log.warning("runtime data sources: the store cannot be read (%s); keeping the "
                        "last known list", store_error_line(error))
            return
        self.on_change()

    def _checked_in_this_request(self) -> bool:
        """Whether this request (app context) checked the version already; notes that it
        has from now on."""
        if not has_app_context():
            return False
        checked = g.setdefault(_CHECKED_KEY, set())
        if id(self) in checked:
            return True
        checked.add(id(self))
        return False

    def _build(self, key: str, stored: StoredSource) -> DataSource | None:
        built = self._built.get(key)
        if built is not None and built[0] == stored.version:
            return built[1]  # built by another thread meanwhile
        spec = self.load(key)
        if spec is None:  # dropped since the list was read
            return None
        source = build_runtime_source(spec, self.settings)
        old = self._built.pop(key, None)
        self._built[key] = (stored.version, source)
        if old is not None:
            _dispose_quietly(old[1])
        return source

    def dispose(self) -> None:
        with self._lock:
            for _, source in self._built.values():
                _dispose_quietly(source)
            self._built.clear()


def _dispose_quietly(source: DataSource) -> None:
    try:
        source.dispose()
    except Exception:  # noqa: BLE001 - a pool that fails to close must not fail the request
        log.warning("data source %s: closing its pool failed", source.name, exc_info=True)
