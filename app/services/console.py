"""The console's rules: the schema it completes from, each user's history, saved queries."""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC
from typing import Any

import sqlglot
from sqlalchemy import delete, func, or_, select
from sqlglot import exp

from ..errors import Conflict, NotFound
from ..extensions import db
from ..rules.names import name_key, validate_name
from ..sql.errors import SqlError
from ..sql.execute import fetch_rows
from ..sql.sources import DataSource, SourceRegistry, VisibleSources
from ..store import ConsoleHistory, MLModel, Project, SavedQuery
from . import access, audit
from .common import commit
from .projects import get_project

# A schema larger than this many columns per source is cut (autocomplete, not a catalogue).
SCHEMA_MAX_COLUMNS = 20_000

# (table, column, type) rows of a source, in its own dialect.
_COLUMNS_SQL = {
    # SQLite's pragma functions are outside the allow-list: its CREATE statements are
    # read instead, and parsed here (see _sqlite_columns).
    "sqlite": "SELECT name, sql FROM sqlite_master WHERE type IN ('table', 'view') "
              "AND name NOT LIKE 'sqlite_%' ORDER BY name",
    "postgresql": "SELECT table_name, column_name, data_type FROM information_schema.columns "
                  "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position",
    "mysql": "SELECT table_name, column_name, data_type FROM information_schema.columns "
             "WHERE table_schema = DATABASE() ORDER BY table_name, ordinal_position",
}


def schema(database: str | None = None) -> dict[str, Any]:
    """Data sources with their tables and columns, projects with their models.

    Every source the caller may query (the others do not exist for it): configured ones and
    those created at run time (or only ``database``, for the databases view, which asks
    after connecting one). A source that cannot be read (down, refused) is listed with its
    error and no tables: the console still completes the others.
    """
    registry = access.queryable_sources()  # only the sources the caller may query
    sources = []
    for source in _readable_sources(registry, database):
        entry: dict[str, Any] = {"name": source.name, "dialect": source.dialect,
                                 "engine": source.engine_name, "tables": []}
        if source.catalog is not None:  # a source that lists its own tables
            entry["tables"] = source.catalog()
            sources.append(entry)
            continue
        try:
            _, rows = fetch_rows(source.name, _COLUMNS_SQL[source.dialect],
                                 max_rows=SCHEMA_MAX_COLUMNS, registry=registry)
        except SqlError as exc:
            entry["error"] = exc.message
            rows = []
        if source.dialect == "sqlite":
            rows = _sqlite_columns(rows)
        tables: dict[str, list[dict[str, str]]] = defaultdict(list)
        for table, column, kind in rows:
            columns = tables[str(table)]
            if column:  # "" marks a table whose columns are unknown (a SQLite view)
                columns.append({"name": str(column), "type": str(kind or "")})
        entry["tables"] = [{"name": t, "columns": c} for t, c in tables.items()]
        sources.append(entry)
    models = defaultdict(list)
    for project_id, name, status in db.session.execute(
            select(MLModel.project_id, MLModel.name, MLModel.status).order_by(MLModel.id)):
        models[project_id].append({"name": name, "status": status})
    projects = [{"name": p.name, "models": models[p.id]}
                for p in db.session.scalars(select(Project).order_by(Project.id))]
    return {"data_sources": sources, "projects": projects}


def _readable_sources(registry: SourceRegistry | VisibleSources, only: str | None
                      ) -> list[DataSource]:
    if only is None:
        found = []
        for name in registry.names():
            try:
                source = registry.get(name)
            except SqlError:
                continue  # a stored source that cannot be built: the databases view says why
            if source is not None:
                found.append(source)
        return found
    source = registry.get(only)
    if source is None and registry.runtime is not None:
        registry.runtime.refresh(force=True)  # connected a moment ago, maybe elsewhere
        source = registry.get(only)
    if source is None:
        raise NotFound(f"Database '{only}' does not exist", title="Database not found")
    return [source]


def _sqlite_columns(rows: list[tuple]) -> list[tuple[str, str, str]]:
    """(table, column, type) from SQLite's (name, CREATE statement) rows; a view's columns,
    or a statement sqlglot cannot read, give a row with an empty column: the table alone."""
    found: list[tuple[str, str, str]] = []
    for name, ddl in rows:
        columns: list[tuple[str, str]] = []
        try:
            tree = sqlglot.parse_one(ddl or "", read="sqlite")
        except sqlglot.errors.ParseError:
            tree = None
        if isinstance(tree, exp.Create) and isinstance(tree.this, exp.Schema):
            for column in tree.this.expressions:
                if isinstance(column, exp.ColumnDef):
                    kind = column.args.get("kind")
                    columns.append((column.name, kind.sql("sqlite") if kind else ""))
        found.extend((str(name), column, kind) for column, kind in columns)
        if not columns:
            found.append((str(name), "", ""))
    return found


def list_history(search: str | None = None, limit: int = 100) -> list[dict[str, Any]]:
    """The caller's statements, newest first; ``search`` matches statement or error text.

    Every statement of POST /api/sql/query is kept, whichever client sent it: its row is
    written with its audit record, before its answer (``audit.record_statement``).
    """
    query = select(ConsoleHistory).where(ConsoleHistory.user_key == audit.history_user())
    if search:
        # LIKE's own wildcards in the search text are taken literally.
        pattern = "%" + search.lower().replace("\\", "\\\\").replace("%", "\\%") \
            .replace("_", "\\_") + "%"
        query = query.where(or_(func.lower(ConsoleHistory.statement).like(pattern, escape="\\"),
                                func.lower(ConsoleHistory.error_message)
                                .like(pattern, escape="\\")))
    # Rows beyond the newest HISTORY_KEEP wait for the next trim (audit.TRIM_EVERY).
    rows = db.session.scalars(query.order_by(ConsoleHistory.id.desc())
                              .limit(min(limit, audit.HISTORY_KEEP)))
    return [history_view(row) for row in rows]


def clear_history() -> None:
    """Forget the caller's statements (the audit log keeps its own records)."""
    db.session.execute(delete(ConsoleHistory).where(
        ConsoleHistory.user_key == audit.history_user()))
    db.session.commit()


def list_saved(project: str) -> list[dict[str, Any]]:
    owner = get_project(project)
    rows = db.session.scalars(select(SavedQuery).where(SavedQuery.project_id == owner.id)
                              .order_by(SavedQuery.name_key))
    return [saved_view(row) for row in rows]


def _saved(owner: Project, name: str) -> SavedQuery | None:
    return db.session.scalar(select(SavedQuery).where(SavedQuery.project_id == owner.id,
                                                      SavedQuery.name_key == name_key(name)))


def save_query(project: str, user: str | None, body: dict[str, Any]) -> dict[str, Any]:
    """Save a statement under a name in a project; the same name again replaces it."""
    owner = get_project(project)
    validate_name("saved query", body["name"])
    saved = _saved(owner, body["name"])
    if saved is None:
        saved = SavedQuery(project_id=owner.id, name=body["name"],
                           name_key=name_key(body["name"]), created_by=user or "")
        db.session.add(saved)
    saved.statement = body["statement"]
    saved.database = body.get("database")
    commit(lambda: Conflict(f"Saved query '{body['name']}' was saved at the same time",
                            title="Saved query already exists"))
    return saved_view(saved)


def delete_saved(project: str, name: str) -> None:
    owner = get_project(project)
    saved = _saved(owner, name)
    if saved is None:
        raise NotFound(f"Saved query '{name}' does not exist in project '{project}'",
                       title="Saved query not found")
    db.session.delete(saved)
    db.session.commit()


def history_view(row: ConsoleHistory) -> dict[str, Any]:
    return {"id": row.id, "statement": row.statement, "database": row.database,
            "ran_at": row.ran_at.astimezone(UTC).isoformat(), "duration_ms": row.duration_ms,
            "row_count": row.row_count, "outcome": row.outcome, "error_code": row.error_code,
            "error_message": row.error_message}


def saved_view(row: SavedQuery) -> dict[str, Any]:
    return {"name": row.name, "statement": row.statement, "database": row.database,
            "created_by": row.created_by,
            "created_at": row.created_at.astimezone(UTC).isoformat(),
            "updated_at": row.updated_at.astimezone(UTC).isoformat()}
