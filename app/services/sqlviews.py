"""Views: a project's named SELECT statements (CREATE VIEW p.v AS (…)), and their rules.

- the statement is checked when the view is created: one read-only SELECT (a write is
  refused then, not at first read), and the data source of ``FROM db`` must exist for the
  caller;
- creating, replacing and dropping need the right to change the project; reading needs the
  right to read it, and the view's statement is then read with the reader's own rights on
  every data source it names (it is expanded where it is named: ``mindsdb/views.py``), so a
  view never grants more than its reader has;
- names are unique per project (a unique key), and every change is in the audit log.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select
from sqlglot import exp

from ..errors import NameTaken, ObjectNotFound, ProjectNotFound, Unprocessable
from ..extensions import db
from ..rules.names import PROJECT_TABLES, lookup_key, name_key, validate_name
from ..sql.errors import SqlError
from ..sql.gate import check_read_only, parse_single
from ..store import Project, SqlView
from . import access, audit
from . import databases as database_service
from . import models as model_service
from .common import commit, delete_or_gone
from .projects import get_project

# Views of views: deeper than any real use, shallow enough to stop a loop.
MAX_DEPTH = 16


class ViewNotFound(ObjectNotFound):
    kind = "View"
    title = "View not found"


def create_view(project_name: str, name: str, query: str, database: str | None = None,
                *, replace: bool = False) -> dict[str, Any]:
    """Create view ``project.name`` (or replace it, with ``replace``); its description."""
    validate_name("view", name)
    project = get_project(project_name, "write")
    _check_statement(query, database)
    _check_cycle(project.name, query, database, {(project.name.lower(), name.lower())}, 0)
    row = _find(project, name)
    if row is not None and not replace:
        raise NameTaken("View", name, project.name)
    before = _entry(row) if row is not None else None
    if row is None:
        row = SqlView(project_id=project.id, name=name, name_key=name_key(name))
        db.session.add(row)
    row.query, row.database = query.strip(), database
    audit.record_change("view", "replace" if before else "create", f"{project.name}.{name}",
                        before, _entry(row))
    commit(lambda: NameTaken("View", name, project.name))
    return _entry(row)


def drop_view(project_name: str, name: str) -> None:
    project = get_project(project_name, "write")
    row = _find(project, name)
    if row is None:
        raise ViewNotFound(name, project.name)
    audit.record_change("view", "drop", f"{project.name}.{row.name}", _entry(row), None)
    delete_or_gone(delete(SqlView).where(SqlView.id == row.id),
                   lambda: ViewNotFound(name, project.name))


def list_views(project_name: str) -> list[dict[str, Any]]:
    project = get_project(project_name, "read")
    rows = db.session.scalars(select(SqlView).where(SqlView.project_id == project.id)
                              .order_by(SqlView.name_key))
    return [_entry(row) for row in rows]


def find_view(project_name: str, name: str) -> dict[str, Any] | None:
    """The view ``project.name`` when the caller may read the project, else None (a
    project it may not see, or no such view: the name is then read as something else)."""
    key = lookup_key(name)
    if not key:
        return None
    try:
        project = get_project(project_name, "read")
    except ProjectNotFound:
        return None
    row = _find(project, name)
    return _entry(row) if row is not None else None


def object_tree(item: str | None = None) -> list[dict[str, Any]]:
    """MindsDB's object tree: the databases (``item`` None), a project's models and views,
    or a data source's tables, each with ``name`` and ``type``."""
    if not item:
        return [{"name": d["name"], "class": "db", "type": d["type"], "engine": d["engine"]}
                for d in database_service.list_databases()]
    if database_service.is_data_source(item):
        return [{"name": t["name"], "class": "table", "type": "table"}
                for t in database_service.list_tables(item)]
    models = sorted({m.name for m in model_service.list_models(item) if m.active})
    # The project's own tables first, as MindsDB lists them: a client reading the nodes'
    # types (mindsdb_sdk's views.list()) never gets an empty tree without columns.
    return [*({"name": t, "class": "table", "type": "table"} for t in PROJECT_TABLES),
            *({"name": n, "class": "table", "type": "model"} for n in models),
            *({"name": v["name"], "class": "table", "type": "view"}
              for v in list_views(item))]


def get_view(project_name: str, name: str) -> dict[str, Any]:
    project = get_project(project_name, "read")
    row = _find(project, name)
    if row is None:
        raise ViewNotFound(name, project.name)
    return _entry(row)


def update_view(project_name: str, name: str, query: str) -> dict[str, Any]:
    """Replace the statement of an existing view (PUT); 404 when there is none."""
    project = get_project(project_name, "write")
    row = _find(project, name)
    if row is None:
        raise ViewNotFound(name, project.name)
    return create_view(project.name, row.name, query, row.database, replace=True)


def _check_cycle(project: str, query: str, database: str | None,
                 visiting: set[tuple[str, str]], depth: int) -> None:
    """Unprocessable when the views ``query`` reads (in any project) read a view of
    ``visiting`` ((project, name) in lower case): such a view could never be read.
    ``database``: the data source bare names are in (a view made FROM db)."""
    tree = parse_single(query, None)
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if table.catalog or not table.name or (not table.db and table.name.lower() in ctes):
            continue
        owner = table.db or (project if database is None else None)
        if owner is None:
            continue  # a bare name of a view made FROM db: a table of that data source
        key = (owner.lower(), table.name.lower())
        if key in visiting or depth >= MAX_DEPTH:
            raise Unprocessable(f"View {owner}.{table.name} reads itself",
                                title="Invalid view")
        view = find_view(owner, table.name)
        if view is not None:
            _check_cycle(owner, view["query"], view["database"], visiting | {key}, depth + 1)


def _check_statement(query: str, database: str | None) -> None:
    try:
        statement = parse_single(query, None)
        check_read_only(statement, None)
    except SqlError as exc:
        raise Unprocessable(f"The view's statement is refused: {exc.message}",
                            title="Invalid view") from None
    if database is not None:
        registry = access.queryable_sources()
        if registry.get(database) is None:
            raise Unprocessable(f"Data source '{database}' does not exist",
                                title="Invalid view")


def _find(project: Project, name: str) -> SqlView | None:
    return db.session.scalar(select(SqlView).where(SqlView.project_id == project.id,
                                                   SqlView.name_key == lookup_key(name)))


def _entry(row: SqlView) -> dict[str, Any]:
    return {"name": row.name, "query": row.query, "database": row.database}
