"""MindsDB statements about data sources: CREATE / DROP / ALTER DATABASE, DESCRIBE DATABASE,
USE.

``CREATE DATABASE name`` without an engine (or with ENGINE = 'mindsdb') still creates a
project (``statements.create_project``); with an engine it connects a data source through
the same service functions as /api/databases. SHOW [FULL] DATABASES and SHOW TABLES FROM a
data source are answered in ``statements`` (they read the registry, which serves the
stored sources too).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from mindsdb_sql_parser.ast import CreateTable, Describe, DropDatabase, DropTables, Use
from mindsdb_sql_parser.ast.mindsdb import AlterDatabase, CreateDatabase

from ..errors import DatabaseNotFound, FileExists, FileNotFound, NameTaken
from ..rules.names import SYSTEM_DATABASE
from ..services import databases as database_service
from ..services import files as file_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.files import FILES_SOURCE
from . import knowledge_bases, statements, tables
from .context import Context
from .errors import if_clause, service_errors
from .relation import Relation

Body = dict[str, Any]


@contextlib.contextmanager
def _database_errors(name: str) -> Iterator[None]:
    try:
        with service_errors({DatabaseNotFound: name, NameTaken: name}):
            yield
    except database_service.ConnectionFailed as exc:
        raise SqlError(ErrorCode.SOURCE_DOWN,
                       f"Can't connect to database '{name}': {exc.detail}") from None


def _single_name(statement: Any, identifier: Any) -> str:
    parts = [str(p) for p in identifier.parts]
    if len(parts) != 1:
        raise SqlError(ErrorCode.INVALID_STATEMENT, f"Invalid database name '{'.'.join(parts)}'")
    return parts[0]


def use(statement: Use, ctx: Context) -> Body:
    """USE x: ok, with x (a project, a data source or information_schema, as stored) as the
    answer's context; HTTP keeps no session, so the client sends it back with its next
    statements, as MindsDB's clients do."""
    name = _single_name(statement, statement.value)
    source = ctx.registry.get(name)  # only the sources the caller may query
    if source is not None:
        return {**statements.ok_body(ctx), "context": {"db": source.name}}
    if name.lower() == SYSTEM_DATABASE:
        return {**statements.ok_body(ctx), "context": {"db": SYSTEM_DATABASE}}
    project = ctx.find_project(name)  # only the projects the caller is a member of
    if project is None:
        raise SqlError(ErrorCode.NOT_FOUND,
                       f"Database '{name}' does not exist: USE names a project or a data "
                       f"source ({', '.join(ctx.registry.names()) or 'none'})")
    return {**statements.ok_body(ctx), "context": {"db": project}}


def create_database(statement: CreateDatabase, ctx: Context) -> Body:
    engine = str(statement.engine) if statement.engine is not None else None
    if engine is None or engine.lower() in ("mindsdb", "project"):
        return statements.create_project(statement, ctx)
    name = _single_name(statement, statement.name)
    params = statement.parameters if statement.parameters is not None else {}
    with _database_errors(name), if_clause(statement.if_not_exists, NameTaken):
        if statement.is_replace and database_service.is_data_source(name):
            database_service.update_database(name, engine, params, check=True, merge=False)
        else:
            # MindsDB checks the connection before it keeps a database created by SQL.
            database_service.create_database(name, engine, params, check=True)
    return statements.ok_body(ctx)


def drop_database(statement: DropDatabase, ctx: Context) -> Body:
    name = _single_name(statement, statement.name)
    if ctx.registry.is_configured(name) or not database_service.is_data_source(name):
        return statements.drop_project(statement, ctx)  # a project, or the configured refusal
    with _database_errors(name), if_clause(statement.if_exists, DatabaseNotFound):
        database_service.delete_database(name)
    return statements.ok_body(ctx)


def alter_database(statement: AlterDatabase, ctx: Context) -> Body:
    name = _single_name(statement, statement.name)
    changes = dict(statement.params or {})
    params = changes.pop("parameters", None)
    engine = changes.pop("engine", None)
    if changes:
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"ALTER DATABASE changes PARAMETERS (and ENGINE); not: "
                       f"{', '.join(changes)}")
    if not database_service.is_data_source(name):
        raise SqlError(ErrorCode.NOT_FOUND, f"Database not found: {name}")
    with _database_errors(name):
        database_service.update_database(name, engine, params, check=True)
    return statements.ok_body(ctx)


def describe(statement: Describe, ctx: Context) -> Body:
    """DESCRIBE DATABASE x, or DESCRIBE x when x is a data source; else a model's DESCRIBE."""
    kind = (statement.type or "").upper()
    parts = [str(p) for p in statement.value.parts]
    if kind in ("DATABASE", "DATABASES") \
            or not kind and len(parts) == 1 and ctx.is_source(parts[0]):
        name = parts[-1]
        databases = tables.databases_table(ctx.registry)
        rows = [r for r in databases.rows if str(r[0]).lower() == name.lower()]
        if not rows:
            raise SqlError(ErrorCode.NOT_FOUND, f"Database not found: {name}")
        return statements.relation_body(Relation.of(tables.DATABASE_COLUMNS, rows), ctx)
    if kind == "KNOWLEDGE_BASE":
        return knowledge_bases.describe(statement, ctx)
    return statements.describe(statement, ctx)


def _in_files(parts: list[str], ctx: Context) -> bool:
    return len(parts) == 2 and parts[0].lower() == FILES_SOURCE or \
        len(parts) == 1 and ctx.db.lower() == FILES_SOURCE


def create_table(statement: CreateTable, ctx: Context) -> Body | None:
    """``CREATE [OR REPLACE] TABLE files.<name> (SELECT …)``: the query's rows stored as an
    uploaded file (a snapshot, as MindsDB makes one); None for any other table (the data
    path refuses it: Quarry never writes to a data source)."""
    parts = [str(p) for p in statement.name.parts]
    if not _in_files(parts, ctx):
        return None
    if statement.from_select is None:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "A file is made from a query: CREATE "
                       "TABLE files.<name> (SELECT …)")
    with service_errors(), if_clause(bool(statement.if_not_exists), FileExists):
        file_service.snapshot_query(parts[-1], statement.from_select.to_string(), ctx.db,
                                    overwrite=bool(statement.is_replace))
    return statements.ok_body(ctx)


def drop_tables(statement: DropTables, ctx: Context) -> Body:
    """``DROP TABLE files.<name>`` (mindsdb_sdk's ``files.tables.drop()``) deletes an
    uploaded file, as DELETE /api/files/<name> does; any other table is a data source's,
    which Quarry never changes."""
    names = []
    for identifier in statement.tables:
        parts = [str(p) for p in identifier.parts]
        if not _in_files(parts, ctx):
            raise SqlError(ErrorCode.READ_ONLY,
                           "Only SELECT statements run on data sources (read-only); DROP "
                           "TABLE is refused (DROP TABLE files.<name> deletes an uploaded "
                           "file)")
        names.append(parts[-1])
    for name in names:
        with service_errors(), if_clause(bool(statement.if_exists), FileNotFound):
            file_service.delete_file(name)
    return statements.ok_body(ctx)
