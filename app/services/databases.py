"""Databases: the data sources created at run time, and the rules they follow.

The REST routes (/api/databases) and the SQL statements (CREATE / DROP / ALTER DATABASE,
DESCRIBE DATABASE) call these functions, so each rule lives here once:

- engines and their parameters are MindsDB's (``sql.runtime.ENGINES``, an allow-list);
- names follow the naming rule and share one name space with projects, both ways;
- configured sources (QUARRY_DATA_SOURCES, demo) are shown but never changed or dropped;
- secret parameters are encrypted in the store and masked on every read;
- SQLite files only under QUARRY_SQLITE_ROOTS, never the metadata store itself;
- a database that models or skills use is dropped only with cascade.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from flask import Flask, current_app
from sqlalchemy import Engine, select
from sqlalchemy.engine import make_url
from sqlalchemy.orm.exc import StaleDataError

from ..errors import (
    BadRequest,
    ConcurrentUpdate,
    Conflict,
    DatabaseNotFound,
    NameReserved,
    NameTaken,
    ProjectNotFound,
    Unprocessable,
)
from ..extensions import db
from ..rules.names import DEFAULT_PROJECT, SYSTEM_DATABASE, name_key, validate_database_name
from ..rules.secrets import MASK, is_secret_key
from ..sql.errors import SqlError
from ..sql.execute import fetch_rows
from ..sql.roles import PRIVILEGED_ROLE_MODES
from ..sql.roles import inspect as inspect_account
from ..sql.runtime import (
    ENGINES,
    RuntimeSources,
    SourceSpec,
    StoredSource,
    build_runtime_source,
    engine_name,
    engine_parameters,
    normalised,
    parameter_problems,
)
from ..sql.sources import DataSource, SourceRegistry, current_sources
from ..store import DatabaseName, DataSourceRecord, MLModel, Project, Skill
from . import access, audit, catalog
from .common import commit
from .credentials import (
    InvalidToken,
    Keyring,
    current_keyring,
    init_keyring,
    seal,
    unseal,
)

log = logging.getLogger(__name__)

SYSTEM_DATABASES = (SYSTEM_DATABASE,)
SQLITE_HEADER = b"SQLite format 3\x00"

# The tables and views of a source, in its own dialect, as (name, kind) rows.
_TABLES_SQL = {
    "sqlite": "SELECT name, type FROM sqlite_master WHERE type IN ('table', 'view') "
              "AND name NOT LIKE 'sqlite_%' ORDER BY name",
    "postgresql": "SELECT table_name, table_type FROM information_schema.tables "
                  "WHERE table_schema = current_schema() ORDER BY table_name",
    "mysql": "SELECT table_name, table_type FROM information_schema.tables "
             "WHERE table_schema = DATABASE() ORDER BY table_name",
}
# What a connection check runs: SQLite opens any file lazily; reading its schema proves it.
_CHECK_SQL = {"sqlite": "SELECT count(*) FROM sqlite_master", "postgresql": "SELECT 1",
              "mysql": "SELECT 1"}


class ConnectionFailed(Exception):
    """The connection check of new parameters failed (MindsDB answers it with 200)."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail


# --- wiring ----------------------------------------------------------------------------------

def init_databases(app: Flask, registry: SourceRegistry) -> None:
    """Give the data path its view of the stored sources (read with the store's engine)."""
    keyring = init_keyring(app)
    with app.app_context():
        engine = db.engine
    registry.attach_runtime(RuntimeSources(
        read_version=lambda: catalog.read_version(engine, catalog.DATA_SOURCES),
        list_stored=lambda: _list_stored(engine),
        load=lambda key: _load_spec(engine, keyring, key),
        settings=dict(app.config)))


_TABLE = DataSourceRecord.__table__


def _list_stored(engine: Engine) -> dict[str, StoredSource]:
    columns = (_TABLE.c.id, _TABLE.c.name, _TABLE.c.name_key, _TABLE.c.engine,
               _TABLE.c.row_version)
    with engine.connect() as conn:
        rows = conn.execute(select(*columns)).all()
    return {r.name_key: StoredSource(r.name, r.engine, (r.id, r.row_version)) for r in rows}


def _load_spec(engine: Engine, keyring: Keyring | None, key: str) -> SourceSpec | None:
    with engine.connect() as conn:
        row = conn.execute(select(_TABLE).where(_TABLE.c.name_key == key)).first()
    if row is None:
        return None
    shown = _shown(row.parameters or {}, row.secrets)
    options = {"public": bool(row.public), "privileged_role": row.privileged_role or "warn",
               "role_warnings": tuple(row.role_warnings)
               if row.role_warnings is not None else None}
    try:
        secrets = _decrypt(keyring, row.secrets)
    except BadRequest as exc:
        return SourceSpec(row.name, row.engine, {}, shown, broken=exc.detail, **options)
    return SourceSpec(row.name, row.engine, {**(row.parameters or {}), **secrets}, shown,
                      **options)


# --- encryption ------------------------------------------------------------------------------

def _is_secret(engine: str, key: str) -> bool:
    declared = {p.name for p in engine_parameters(engine) if p.secret}
    return key in declared or is_secret_key(key)


def _split(engine: str, params: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(plain, secret) parameters; an empty secret is no secret."""
    plain, secret = {}, {}
    for key, value in params.items():
        if _is_secret(engine, key) and value not in (None, ""):
            secret[key] = value
        else:
            plain[key] = value
    return plain, secret


def _encrypt(secret: dict[str, Any]) -> str | None:
    return seal(secret, "The database", list(secret)) if secret else None


def _decrypt(keyring: Keyring | None, token: str | None) -> dict[str, Any]:
    return unseal(keyring, token) or {}


def _shown(parameters: dict[str, Any], token: str | None) -> dict[str, Any]:
    """The parameters as every read shows them: secrets as the mask."""
    shown = dict(parameters)
    if token:
        # The secrets' names are not in clear either: say only that a password is set.
        shown["password"] = MASK
    return shown


# --- checks ----------------------------------------------------------------------------------

def _engine(engine: Any) -> str:
    canonical = engine_name(engine) if isinstance(engine, str) else None
    if canonical is None:
        message = (f"Unknown engine {engine!r}; Quarry serves: {', '.join(ENGINES)} "
                   "(a project is created without an engine)")
        raise Unprocessable(message, title="Unknown engine", errors={"engine": [message]})
    return canonical


def _check_name(name: Any) -> str:
    if isinstance(name, str) and name_key(name) == SYSTEM_DATABASE:
        # A name of the right shape that is taken, by SQL's catalogue: 409, as for a project's.
        raise NameReserved(f"'{name}' is the name of a system database", name=name)
    validate_database_name("database", name)
    if name.startswith("-"):
        message = f"Invalid name {name!r}: a database name starts with a letter or '_'"
        raise Unprocessable(f"Invalid database name: {message}", errors={"name": [message]})
    return name


def _check_parameters(engine: str, params: Any) -> dict[str, Any]:
    if not isinstance(params, dict):
        raise Unprocessable("parameters must be a JSON object",
                            errors={"parameters": ["Not a valid mapping type."]})
    problems = parameter_problems(engine, params)
    if problems:
        listing = "; ".join(f"{key}: {message.rstrip('.')}" for key, message in problems.items())
        raise Unprocessable(f"Invalid parameters for engine {engine!r}: {listing}",
                            title="Invalid parameters",
                            errors={"parameters": {k: [m] for k, m in problems.items()}})
    values = normalised(engine, params)
    if engine == "sqlite":
        values["db_file"] = _sqlite_file(values["db_file"])
    return values


def sqlite_roots() -> list[str]:
    """The folders SQLite databases may be opened from (symlinks resolved)."""
    setting = current_app.config.get("SQLITE_ROOTS")
    roots = [r for r in (setting or "").split(os.pathsep) if r.strip()] \
        or [current_app.instance_path]
    return [os.path.realpath(r) for r in roots]


def _store_files() -> set[str]:
    url = make_url(current_app.config["SQLALCHEMY_DATABASE_URI"])
    if url.get_backend_name() != "sqlite" or not url.database:
        return set()
    store = os.path.realpath(url.database)
    return {store, *(store + suffix for suffix in ("-wal", "-shm", "-journal"))}


def _sqlite_file(path: str) -> str:
    """The real path of an allowed SQLite file, or 422 naming db_file."""
    roots = sqlite_roots()
    real = os.path.realpath(os.path.join(roots[0], path))  # '..' and symlinks resolved

    def refuse(why: str) -> Unprocessable:
        return Unprocessable(f"db_file {path!r} cannot be opened: {why}",
                             title="Invalid parameters",
                             errors={"parameters": {"db_file": [why]}})

    if not any(os.path.commonpath([real, root]) == root for root in roots):
        raise refuse("it is not under a folder of QUARRY_SQLITE_ROOTS")
    if real in _store_files():
        raise refuse("it is Quarry's metadata store")
    if not os.path.isfile(real):
        raise refuse("no such file")
    try:
        with open(real, "rb") as handle:
            header = handle.read(len(SQLITE_HEADER))
    except OSError:
        raise refuse("it cannot be read") from None
    if header != SQLITE_HEADER:
        raise refuse("it is not a SQLite database")
    return real


def name_owner(name: str) -> str | None:
    """What holds ``name`` in SQL's one name space of databases (SHOW DATABASES):
    "configured" (QUARRY_DATA_SOURCES or the demo), "stored" (a data source created at run
    time), "project" — or None when the name is free (``information_schema`` is no name at
    all: ``rules.names.validate_database_name``).

    The one rule for both directions: ``_check_free`` (a new data source) and
    ``projects.create_project`` (a new project) ask it.
    """
    if current_sources().is_configured(name):
        return "configured"
    if _record(name) is not None:
        return "stored"
    if db.session.scalar(select(Project.id)
                         .where(Project.name_key == name_key(name))) is not None:
        return "project"
    return None


def _check_free(name: str) -> None:
    """409 unless ``name`` is free in the one name space of databases and projects."""
    owner = name_owner(name)
    if owner == "configured":
        raise NameReserved(f"Database '{name}' already exists (a configured data source)",
                           name=name)
    if owner == "project":
        raise NameReserved(f"The name '{name}' is taken by a project; databases and projects "
                           "share one name space", name=name)
    if owner == "stored":
        raise NameTaken("Database", name)


# The 409 a create answers when the other kind of the one name space holds the name.
_TAKEN_BY = {
    "project": lambda name: NameReserved(f"The name '{name}' is taken by a project; databases "
                                         "and projects share one name space", name=name),
    "data": lambda name: NameReserved(f"'{name}' is the name of a data source; projects and "
                                      "data sources share one name space (SHOW DATABASES)",
                                      name=name),
}
_KIND_TITLE = {"project": "Project", "data": "Database"}


def name_taken(name: str, kind: str) -> NameTaken | NameReserved:
    """The 409 for a name another request took first, for a create of ``kind`` ("project" or
    "data"): which kind took it is in the shared name table (DatabaseName)."""
    holder = db.session.scalar(select(DatabaseName.kind)
                               .where(DatabaseName.name_key == name_key(name)))
    if holder is not None and holder != kind:
        return _TAKEN_BY[holder](name)
    return NameTaken(_KIND_TITLE[kind], name)


def is_data_source(name: str) -> bool:
    """Whether ``name`` names a data source, configured or stored (for the project rule)."""
    return current_sources().is_configured(name) or _record(name) is not None


# Quarry's own options of a data source, given beside its connection parameters (REST
# "parameters", SQL PARAMETERS) as for QUARRY_DATA_SOURCES: never sent to the driver.
OPTIONS = ("public", "privileged_role")


def _split_options(params: Any) -> tuple[Any, dict[str, Any]]:
    """(connection parameters, checked options) of what the caller sent."""
    if not isinstance(params, dict):
        return params, {}
    options = {k: params[k] for k in OPTIONS if k in params}
    problems = {}
    if "public" in options and not isinstance(options["public"], bool):
        problems["public"] = ["Must be true or false."]
    if "privileged_role" in options and options["privileged_role"] not in PRIVILEGED_ROLE_MODES:
        problems["privileged_role"] = [f"One of {', '.join(PRIVILEGED_ROLE_MODES)}."]
    if problems:
        listing = "; ".join(f"{k}: {m[0]}" for k, m in problems.items())
        raise BadRequest(f"Invalid options: {listing}", title="Invalid parameters",
                         errors={"parameters": problems})
    return {k: v for k, v in params.items() if k not in OPTIONS}, options


def _account_check(name: str, engine: str, values: dict[str, Any],
                   privileged_role: str) -> list[str] | None:
    """What the account of new parameters may do beyond reading ([]: nothing); None when it
    cannot be checked (the server is down: checked on its first statement then). With
    privileged_role "refuse", a privileged or uncheckable account is refused (400)."""
    if ENGINES[engine][0] == "sqlite":
        return []
    source = build_runtime_source(SourceSpec(name, engine, values, {}), current_app.config)
    try:
        conn = source.connect()
        try:
            report = inspect_account(source.dialect, conn.driver_connection)
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - unreachable or refused: not checked
        if privileged_role == "refuse":
            raise BadRequest(f"The account of database '{name}' cannot be checked "
                             f"({_first_line(exc)}), and its option privileged_role is "
                             "'refuse'", title="Account not checked",
                             errors={"parameters": {"privileged_role": [
                                 "The account must be checked: the server must answer."]}}
                             ) from None
        return None
    finally:
        source.dispose()
    warnings = list(report.warnings) if report is not None else []
    if warnings and privileged_role == "refuse":
        raise BadRequest(f"The account of database '{name}' {'; '.join(warnings)}, and its "
                         "option privileged_role is 'refuse': give it a SELECT-only account "
                         "(docs/sql.md, 'The account')", title="Privileged account",
                         errors={"parameters": {"user": warnings}})
    if warnings:
        log.warning("Database '%s' (created at run time) %s. Quarry keeps its statements "
                    "read-only, but give it a SELECT-only account (docs/sql.md)", name,
                    "; ".join(warnings))
    return warnings


def check_connection(engine: str, params: dict[str, Any]) -> None:
    """Open the source ``params`` describe and read from it; ConnectionFailed if that fails."""
    spec = SourceSpec("connection_check", engine, params, {})
    source = build_runtime_source(spec, current_app.config)
    try:
        _probe(source)
    finally:
        source.dispose()


def _probe(source: DataSource) -> None:
    """Connect to ``source`` and read from it; ConnectionFailed with the driver's words."""
    try:
        conn = source.connect()
        try:
            cursor = conn.cursor()
            cursor.execute(_CHECK_SQL[source.dialect])
            cursor.fetchall()
            cursor.close()
        finally:
            conn.close()
    except Exception as exc:  # noqa: BLE001 - every driver error is a failed check
        raise ConnectionFailed(_first_line(exc)) from None


def _first_line(exc: BaseException) -> str:
    inner = getattr(exc, "orig", None) or exc
    text = str(inner).strip().splitlines()
    return text[0] if text else type(inner).__name__


# --- reads -----------------------------------------------------------------------------------

def _record(name: str) -> DataSourceRecord | None:
    return db.session.scalar(select(DataSourceRecord)
                             .where(DataSourceRecord.name_key == name_key(name)))


def _stored_view(record: DataSourceRecord) -> dict[str, Any]:
    warnings = record.role_warnings
    if ENGINES.get(record.engine, ("",))[0] == "sqlite":
        role_check = "not_applicable"
    elif warnings is None:
        role_check = "unknown"
    else:
        role_check = "privileged" if warnings else "passed"
    return {"id": record.id, "name": record.name, "type": "data", "class_type": "sql",
            "engine": record.engine, "permanent": False, "configured": False,
            "date_last_update": record.updated_at.isoformat(),
            "connection_data": _shown(record.parameters or {}, record.secrets),
            "public": bool(record.public), "privileged_role": record.privileged_role,
            "role_check": role_check, "warnings": list(warnings or [])}


def _configured_view(name: str) -> dict[str, Any]:
    registry = current_sources()
    source = registry.get(name)
    return {"id": None, "name": source.name, "type": "data", "class_type": "sql",
            "engine": source.engine_name, "permanent": True, "configured": True,
            "date_last_update": None, "connection_data": connection_data(source.info)}


def connection_data(info: dict[str, Any]) -> dict[str, Any]:
    """A configured or stored source's parameters as MindsDB names them, secrets masked."""
    if "parameters" in info:
        return dict(info["parameters"])
    if "path" in info:
        return {"db_file": info["path"]}
    if "url" not in info:
        return {}
    url = make_url(info["url"])
    data = {"host": url.host, "port": url.port, "user": url.username,
            "password": MASK if url.password else None, "database": url.database}
    data.update({k: v for k, v in url.query.items() if k != "password"})
    return {k: v for k, v in data.items() if v is not None}


def list_databases() -> list[dict[str, Any]]:
    """information_schema, the projects, then every data source (MindsDB's order)."""
    result: list[dict[str, Any]] = [
        {"name": n, "type": "system", "id": None, "engine": None, "visible": True,
         "deletable": False} for n in SYSTEM_DATABASES]
    projects = select(Project).order_by(Project.id)
    if (visible := access.visible_project_filter()) is not None:
        projects = projects.where(visible)  # only the projects the caller is a member of
    for project in db.session.scalars(projects):
        result.append({"name": project.name, "type": "project", "id": project.id,
                       "engine": None, "visible": True,
                       "deletable": project.name_key != DEFAULT_PROJECT})
    registry = current_sources()
    stored = {r.name_key: r for r in db.session.scalars(select(DataSourceRecord))}
    names = sorted({*(n for n in registry.names() if registry.is_configured(n)),
                    *(r.name for r in stored.values())}, key=str.lower)
    for name in filter(access.may_query, names):  # only the sources the caller may query
        configured = registry.is_configured(name)
        view = _configured_view(name) if configured else _stored_view(stored[name_key(name)])
        view.update(visible=True, deletable=not configured)
        result.append(view)
    return result


def get_database(name: str, *, check: bool = False) -> dict[str, Any]:
    """One database: a data source (configured or stored) or a project; with ``check``,
    its ``connection_status`` as MindsDB reports it. A source the caller may not query and a
    project it is no member of are not found, as in the listing."""
    if is_data_source(name) and not access.may_query(name):
        raise DatabaseNotFound(name)
    if current_sources().is_configured(name):
        view = _configured_view(name)
    elif (record := _record(name)) is not None:
        view = _stored_view(record)
    elif (project := db.session.scalar(select(Project)
                                       .where(Project.name_key == name_key(name)))) is not None:
        try:
            access.require_project(project, "read")
        except ProjectNotFound:
            raise DatabaseNotFound(name) from None
        view = {"name": project.name, "type": "project", "id": project.id, "engine": None}
    else:
        raise DatabaseNotFound(name)
    if check:
        view["connection_status"] = _connection_status(view)
    return view


def _connection_status(view: dict[str, Any]) -> dict[str, Any]:
    if view["type"] != "data":
        return {"success": True, "error_message": None}
    source = current_sources().get(view["name"])
    try:
        if source is None:  # dropped since it was read
            raise ConnectionFailed("the data source was dropped meanwhile")
        _probe(source)  # through its own pool: the connection it opens is kept for queries
    except ConnectionFailed as exc:
        return {"success": False, "error_message": exc.detail}
    return {"success": True, "error_message": None}


def require_data_source(name: str) -> None:
    """404 unless ``name`` is a data source (configured or stored)."""
    if not is_data_source(name):
        raise DatabaseNotFound(name, detail=f"Data source '{name}' does not exist")


def list_tables(name: str) -> list[dict[str, Any]]:
    """The tables and views of a data source, as MindsDB lists them ({name, type})."""
    if not access.may_query(name):  # not shown, so not found: as a missing source
        raise DatabaseNotFound(name, detail=f"Data source '{name}' does not exist")
    require_data_source(name)
    registry = current_sources()
    source = registry.require(name)
    if source.catalog is not None:  # a source that lists its own tables (uploaded files)
        return [{"name": t["name"], "type": "data"} for t in source.catalog()]
    try:
        _, rows = fetch_rows(source.name, _TABLES_SQL[source.dialect],
                             max_rows=source.max_rows, registry=registry)
    except SqlError as exc:
        raise Conflict(f"The tables of '{source.name}' cannot be listed: {exc.message}",
                       title="Data source unavailable") from None
    return [{"name": r[0], "type": "view" if "view" in str(r[1]).lower() else "data"}
            for r in rows]


# --- writes ----------------------------------------------------------------------------------

def create_database(name: Any, engine: Any, params: Any, *, check: bool = False
                    ) -> dict[str, Any]:
    """Store a new data source (admins); 409 when the name is taken, ConnectionFailed when
    checked."""
    access.require_admin("create data sources")
    name = _check_name(name)
    if _record(name) is not None:
        # Before the parameters are read: CREATE DATABASE IF NOT EXISTS accepts this one.
        raise NameTaken("Database", name)
    engine = _engine(engine)
    params, options = _split_options(params)
    values = _check_parameters(engine, params if params is not None else {})
    _check_free(name)
    plain, secret = _split(engine, values)
    token = _encrypt(secret)
    if check:
        check_connection(engine, values)
    privileged_role = options.get("privileged_role", "warn")
    warnings = _account_check(name, engine, values, privileged_role)
    record = DataSourceRecord(name=name, name_key=name_key(name), engine=engine,
                              parameters=plain, secrets=token,
                              public=options.get("public", False),
                              privileged_role=privileged_role, role_warnings=warnings)
    db.session.add(record)
    # The name's row: a project created at the same moment with this name cannot both commit.
    db.session.add(DatabaseName(name_key=name_key(name), kind="data"))
    audit.record_change("database", "create", name, None,
                        {"engine": engine, "parameters": _shown(plain, token),
                         "public": record.public, "privileged_role": privileged_role})
    catalog.bump(catalog.DATA_SOURCES)
    commit(lambda: name_taken(name, "data"))
    _changed()
    log.info("database %s created (engine %s)", name, engine)  # never the parameters
    return _stored_view(record)


def update_database(name: str, engine: Any, params: Any, *, check: bool = False,
                    merge: bool = True) -> tuple[dict[str, Any], bool]:
    """Change a stored source's parameters, or create it when there is none: (view, created).
    Admins only. With ``merge`` (PUT, ALTER DATABASE: MindsDB's way) the given parameters
    are merged into the stored ones and a parameter given as null is removed; without it
    (CREATE OR REPLACE) they replace them. Either way a secret sent back as the mask keeps
    its value."""
    access.require_admin("change data sources")
    if current_sources().is_configured(name):
        raise Conflict(f"'{name}' is a configured data source (QUARRY_DATA_SOURCES): it "
                       "cannot be changed over the API", title="Configured data source")
    record = _record(name)
    if record is None:
        if engine is None:
            raise Unprocessable("Missing engine: there is no database named "
                                f"'{name}' to change, and creating one needs an engine",
                                errors={"engine": ["Missing data for required field."]})
        return create_database(name, engine, params, check=check), True
    engine = _engine(engine) if engine is not None else record.engine
    params, options = _split_options(params)
    if params is None:  # only the engine (or only a check): the parameters stay
        params, merge = {}, True
    if isinstance(params, dict):  # anything else: _check_parameters says what is wrong
        params = _merged(record, engine, params) if merge else \
            _unmasked(record, engine, params)
    values = _check_parameters(engine, params)
    if check:
        check_connection(engine, values)
    plain, secret = _split(engine, values)
    before = {"engine": record.engine, "parameters": _shown(record.parameters or {},
                                                            record.secrets)}
    privileged_role = options.get("privileged_role", record.privileged_role)
    warnings = _account_check(record.name, engine, values, privileged_role)
    record.engine, record.parameters, record.secrets = engine, plain, _encrypt(secret)
    record.public = options.get("public", record.public)
    record.privileged_role, record.role_warnings = privileged_role, warnings
    audit.record_change("database", "update", record.name, before,
                        {"engine": engine, "parameters": _shown(plain, record.secrets),
                         "public": record.public, "privileged_role": privileged_role})
    catalog.bump(catalog.DATA_SOURCES)
    try:
        commit(lambda: ConcurrentUpdate(f"Database '{name}' changed meanwhile; try again"))
    except StaleDataError:
        # The row version moved: another request changed or dropped it since it was read.
        db.session.rollback()
        raise ConcurrentUpdate(f"Database '{name}' was changed or dropped by another "
                               "request meanwhile; read it again") from None
    _changed()
    log.info("database %s changed", record.name)
    return _stored_view(record), False


def _merged(record: DataSourceRecord, engine: str, changes: dict[str, Any]) -> dict[str, Any]:
    """The stored parameters (secrets decrypted only when kept) with ``changes`` merged in;
    a change to null removes the parameter."""
    current = dict(record.parameters or {})
    kept = [k for k in _shown({}, record.secrets) if changes.get(k, MASK) == MASK]
    if kept:
        current.update(_decrypt(current_keyring(), record.secrets))
    merged = {**current, **{k: v for k, v in changes.items() if v != MASK
                            or not _is_secret(engine, k)}}
    return {k: v for k, v in merged.items() if v is not None}


def _unmasked(record: DataSourceRecord, engine: str, params: dict[str, Any]) -> dict[str, Any]:
    """``params`` in place of the stored ones, a secret sent back as the mask keeping its
    stored value."""
    given = dict(params)
    stored_secrets = None
    for key, value in list(given.items()):
        if value == MASK and _is_secret(engine, key):
            if stored_secrets is None:
                stored_secrets = _decrypt(current_keyring(), record.secrets)
            if key in stored_secrets:
                given[key] = stored_secrets[key]
            else:
                del given[key]
    return given


def references(name: str) -> dict[str, list[str]]:
    """The models (trained from it) and sql skills (reading it) that use data source ``name``."""
    key = name_key(name)
    found: dict[str, list[str]] = {}
    models = db.session.execute(
        select(Project.name, MLModel.name, MLModel.data_source)
        .join(Project, Project.id == MLModel.project_id).order_by(MLModel.id)).all()
    names = [f"{p}.{m}" for p, m, source in models if name_key(source or "") == key]
    if names:
        found["models"] = list(dict.fromkeys(names))
    skills = db.session.execute(
        select(Project.name, Skill.name, Skill.params)
        .join(Project, Project.id == Skill.project_id).order_by(Skill.id)).all()
    names = [f"{p}.{s}" for p, s, params in skills
             if isinstance(params, dict) and isinstance(params.get("database"), str)
             and name_key(params["database"]) == key]
    if names:
        found["skills"] = names
    return found


def delete_database(name: str, *, cascade: bool = False) -> None:
    """Drop a stored source (admins); its users (models, skills) first, only with cascade."""
    access.require_admin("drop data sources")
    if current_sources().is_configured(name):
        raise Conflict(f"'{name}' is a configured data source (QUARRY_DATA_SOURCES): it "
                       "cannot be dropped over the API", title="Configured data source")
    record = _record(name)
    if record is None:
        if db.session.scalar(select(Project.id).where(Project.name_key == name_key(name))):
            raise Unprocessable(f"'{name}' is a project, not a data source: delete it with "
                                f"DELETE /api/projects/{name} (or DROP PROJECT {name})",
                                title="Not a data source")
        raise DatabaseNotFound(name)
    used = references(record.name)
    if used and not cascade:
        listing = "; ".join(f"{kind}: {', '.join(names)}" for kind, names in used.items())
        raise Conflict(f"Database '{record.name}' is in use ({listing}); delete them first "
                       "or pass cascade=true", title="Database in use", references=used)
    if used:
        _delete_users(record.name)
    audit.record_change("database", "delete", record.name,
                        {"engine": record.engine, "references": used or None}, None)
    deleted = db.session.execute(db.delete(DataSourceRecord)
                                 .where(DataSourceRecord.id == record.id)).rowcount
    db.session.execute(db.delete(DatabaseName).where(
        DatabaseName.name_key == record.name_key, DatabaseName.kind == "data"))
    catalog.bump(catalog.DATA_SOURCES)
    db.session.commit()
    if not deleted:  # dropped by another request meanwhile
        raise DatabaseNotFound(name)
    _changed()
    log.info("database %s dropped", record.name)


def _delete_users(name: str) -> None:
    key = name_key(name)
    model_ids = [i for i, source in db.session.execute(select(MLModel.id, MLModel.data_source))
                 if name_key(source or "") == key]
    skill_ids = [i for i, params in db.session.execute(select(Skill.id, Skill.params))
                 if isinstance(params, dict) and isinstance(params.get("database"), str)
                 and name_key(params["database"]) == key]
    if model_ids:
        db.session.execute(db.delete(MLModel).where(MLModel.id.in_(model_ids)))
    if skill_ids:
        db.session.execute(db.delete(Skill).where(Skill.id.in_(skill_ids)))


def check_parameters(engine: Any, params: Any) -> dict[str, Any]:
    """Test parameters without storing anything: MindsDB's {"status": …} answer."""
    # It opens a connection to any host named: an admin's tool, like creating a source.
    access.require_admin("check data-source parameters")
    values = _check_parameters(_engine(engine), params if params is not None else {})
    try:
        check_connection(engine_name(engine), values)
    except ConnectionFailed as exc:
        return {"status": "connection_error", "detail": exc.detail}
    return {"status": "success"}


def rotate_key() -> int:
    """Encrypt every stored secret again with the newest key; the number of rows changed."""
    keyring = current_keyring()
    if keyring is None:
        raise BadRequest("QUARRY_ENCRYPTION_KEY is not set: there is no key to rotate to",
                         title="Encryption key not configured")
    records = db.session.scalars(select(DataSourceRecord)
                                 .where(DataSourceRecord.secrets.is_not(None))).all()
    for record in records:
        try:
            record.secrets = keyring.rotate(record.secrets)
        except InvalidToken:
            db.session.rollback()
            raise BadRequest(f"The credentials of database '{record.name}' cannot be "
                             "decrypted with any key of QUARRY_ENCRYPTION_KEY; nothing was "
                             "changed", title="Encryption key not configured") from None
    catalog.bump(catalog.DATA_SOURCES)
    db.session.commit()
    _changed()
    return len(records)


def _changed() -> None:
    """This process sees its own change at once (the others at their next request: the
    change's transaction moved the catalog version)."""
    runtime: Callable[..., Any] | None = getattr(current_sources().runtime, "refresh", None)
    if runtime is not None:
        runtime(force=True)
