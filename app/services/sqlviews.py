"""Views: a project's named SELECT statements (CREATE VIEW p.v AS (…)), and their rules.

- the statement is checked when the view is created or changed, without reading a row: one
  read-only SELECT (a write is refused then, not at first read), whose tables — of data
  sources, uploaded files and other views, in any project — exist, whose columns resolve,
  and whose data sources the caller may read (``check_statement``); a view that would read
  itself, through any number of views, is refused too;
- creating, replacing and dropping need the right to change the project; reading needs the
  right to read it, and the view's statement is then read with the reader's own rights on
  every data source it names: it is expanded where it is named (``expand``), so a view
  never grants more than its reader has;
- names are unique per project (a unique key), and every change is in the audit log.
"""

from __future__ import annotations

from typing import Any

from flask import current_app
from sqlalchemy import delete, select
from sqlglot import exp

from ..errors import ModelNotFound, NameTaken, ObjectNotFound, ProjectNotFound, Unprocessable
from ..extensions import db
from ..federation import run as federation
from ..lru import LruCache
from ..rules.names import PROJECT_TABLES, lookup_key, name_key, validate_name
from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import check_read_only, parse_single
from ..sql.sources import SourceRegistry
from ..sql.syntax import parse_sqlglot
from ..store import Project, SqlView
from . import access, audit
from . import databases as database_service
from . import models as model_service
from .common import commit, delete_or_gone
from .projects import get_project

# Views of views: deeper than any real use, shallow enough to stop a loop.
MAX_DEPTH = 16
# Marks the statement of a view made FROM a data source (read in that source's dialect).
_NATIVE = "quarry_native_dialect"


class ViewNotFound(ObjectNotFound):
    kind = "View"
    title = "View not found"


def create_view(project_name: str, name: str, query: str, database: str | None = None,
                *, replace: bool = False) -> dict[str, Any]:
    """Create view ``project.name`` (or replace it, with ``replace``); its description."""
    validate_name("view", name)
    project = get_project(project_name, "write")
    check_statement(project.name, name, query, database)
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


def expand(query: str, db: str | None, registry: SourceRegistry) -> str | None:
    """``query`` with every view it names replaced by its SELECT (``SELECT … FROM p.v``
    becomes ``SELECT … FROM (<v's SELECT>) AS v``), or None when it names no view. ``db``:
    the project bare names are in. The views are those the caller may read; SqlError for a
    view that reads itself.

    A statement seen before is not parsed again to find that it names no view: the tables
    that might be views are kept by its text (``_CANDIDATES``), and each is looked up as
    the first time (a data source of the caller's? a view it may read?)."""
    key = (query, db)
    kept = _CANDIDATES.get(key)
    if kept is not None and not any(registry.get(project) is None and
                                    find_view(project, name) is not None
                                    for project, name in kept):
        return None
    try:
        parsed = parse_sqlglot(query, None)
    except SqlError:
        parsed = []
    tree = parsed[0] if len(parsed) == 1 else None
    if len(query) <= _KEPT_TEXT:
        _CANDIDATES.put(key, _candidates(tree, db) if tree is not None else ())
    if tree is None or not list(tree.find_all(exp.Table)):
        return None
    if not _replace_views(tree, db, registry, set(), 0):
        return None
    return _render(tree, db, registry)


# The tables each statement names that might be views, by its text and project (see
# ``expand``): a federated statement's text was parsed anew at each run to learn that it
# names none (1-4 ms of a 40-100 ms statement over several sources). Texts up to _KEPT_TEXT
# characters (256 of them: 4 MiB of ASCII text in a process at most).
_CANDIDATES: LruCache[tuple[str, str | None], tuple[tuple[str, str], ...]] = LruCache(256)
_KEPT_TEXT = 16 * 1024


def _candidates(tree: exp.Expression, db: str | None) -> tuple[tuple[str, str], ...]:
    """(project, name) of each table of ``tree`` that ``_replace_views`` would look up."""
    return tuple(dict.fromkeys((project, table.name) for table, project in
                               _maybe_views(tree, db) if project))


def _maybe_views(tree: exp.Expression, db: str | None) -> list[tuple[exp.Table, str | None]]:
    """Each table of ``tree`` that may name a view, with its project (``db`` for a bare
    name; None without one): not a three-part name, a table function or a CTE's name."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return [(table, table.db or db) for table in tree.find_all(exp.Table)
            if not table.catalog and table.name
            and not (not table.db and table.name.lower() in ctes)]


def check_statement(project: str, name: str, query: str, database: str | None) -> None:
    """Unprocessable unless the statement of view ``project.name`` (made ``FROM database``)
    can be read by the caller: checked as running it would check it, its columns read and
    none of its rows."""
    registry = access.queryable_sources()
    if database is not None and registry.get(database) is None:
        raise Unprocessable(f"Data source '{database}' does not exist", title="Invalid view")
    dialect = _native_dialect(database, registry)
    try:
        check_read_only(parse_single(query, dialect), dialect)
    except SqlError as exc:
        raise Unprocessable(f"The view's statement is refused: {exc.message}",
                            title="Invalid view") from None
    try:
        tree = _expanded(query, project, database, registry,
                         {(project.lower(), name.lower())}, 0)
        # A prediction (rows JOIN a model, as in MindsDB): the model exists, and the rows
        # it is joined with are checked as a view of their own would be.
        tree = predicted_rows(tree, project, registry) or tree
        _check_project_tables(tree, registry)
        # Described as it is read: SELECT … FROM p.v is SELECT … FROM (<v's SELECT>) AS v
        # (MariaDB refuses such a derived table with two columns of one name).
        read = exp.select("*").from_(exp.Subquery(
            this=tree, alias=exp.TableAlias(this=exp.to_identifier(name))))
        federation.query_columns(_render(read, None, registry), registry, None,
                                 timeout_s=current_app.config["SQL_TIMEOUT_S"])
    except SqlError as exc:
        raise Unprocessable(f"The view's statement cannot be read: {exc.message}",
                            title="Invalid view") from None


def predicted_rows(tree: exp.Expression, project: str, registry: SourceRegistry
                   ) -> exp.Select | None:
    """For a SELECT that JOINs a model of a project with rows (a table, a file, a view or a
    subquery), the rows' side as a statement of its own; None for any other statement."""
    from_ = tree.args.get("from_") if isinstance(tree, exp.Select) else None
    joins = tree.args.get("joins") or [] if from_ is not None else []
    if len(joins) != 1:
        return None
    sides = [from_.this, joins[0].this]
    for model_side, rows in ((sides[1], sides[0]), (sides[0], sides[1])):
        if isinstance(model_side, exp.Table) and _names_model(model_side, project, registry):
            return exp.select("*").from_(rows.copy())
    return None


def _names_model(table: exp.Table, project: str, registry: SourceRegistry) -> bool:
    owner = table.db or project
    if table.catalog or not table.name or registry.get(owner) is not None:
        return False
    try:
        model_service.get_model(owner, table.name)
    except (ModelNotFound, ProjectNotFound):
        return False
    return True


def _check_project_tables(tree: exp.Expression, registry: SourceRegistry) -> None:
    """After expansion, a table named in a project is no view: say so (rather than that
    the project is no data source)."""
    for table in tree.find_all(exp.Table):
        owner = table.db
        if not owner or table.catalog or registry.get(owner) is not None:
            continue
        try:
            get_project(owner, "read")
        except ProjectNotFound:
            continue  # no project either: the data path names the unknown source
        raise SqlError(ErrorCode.UNKNOWN_TABLE,
                       f"Table not found: {owner}.{table.name} (project {owner} has no view "
                       "of that name; a view reads data sources, files and other views)")


def _expanded(query: str, project: str, database: str | None, registry: SourceRegistry,
              visiting: set[tuple[str, str]], depth: int) -> exp.Expression:
    try:
        parsed = parse_sqlglot(query, _native_dialect(database, registry))
    except SqlError as exc:
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"The view's statement cannot be read: {exc.message}") from None
    if len(parsed) != 1 or parsed[0] is None:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "A view holds exactly one SELECT")
    tree = parsed[0]
    if database is not None:
        _in_source(tree, database)
        tree.meta[_NATIVE] = _native_dialect(database, registry)
    else:
        _replace_views(tree, project, registry, visiting, depth)
    return tree


def _native_dialect(database: str | None, registry: SourceRegistry) -> str | None:
    """The dialect a view's statement is written in: its data source's for a view made
    ``FROM database`` (MindsDB's native query), else the generic one."""
    source = registry.get(database) if database is not None else None
    return source.sqlglot_dialect if source is not None else None


def _in_source(tree: exp.Expression, database: str) -> None:
    """The statement of a view made ``FROM database`` is the source's own, as in MindsDB:
    every table it names is one of that source (``t`` is ``database.t``, ``schema.t`` is
    ``database.schema.t``), never a view or another data source."""
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    source = exp.to_identifier(database)
    for table in tree.find_all(exp.Table):
        if not table.name or table.catalog:
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        table.set("catalog" if table.db else "db", source.copy())


def _render(tree: exp.Expression, db: str | None, registry: SourceRegistry) -> str:
    """The expanded statement's text. With a view made ``FROM db`` in it, and one data
    source read, in that source's dialect: the view's statement was read in it, and keeps
    its meaning only there (MariaDB reads ``"a"`` as a string, `` `a` `` as a column).
    Otherwise in the generic dialect, as the statements were read."""
    natives = {node.meta.get(_NATIVE) for node in tree.find_all(exp.Query)} - {None}
    if not natives:
        return tree.sql()
    context = registry.get(db) if db else None
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    dialects = set()
    for table in tree.find_all(exp.Table):
        if not table.name or not table.db and table.name.lower() in ctes:
            continue
        owner = table.catalog or table.db
        source = registry.get(owner) if owner else None
        source = source or (context if not table.catalog else None)
        if source is None:
            return tree.sql()  # a name the data path reports on
        dialects.add(source.sqlglot_dialect)
    if len(dialects) != 1 or not dialects <= natives \
            or context is not None and context.sqlglot_dialect not in dialects:
        return tree.sql()
    return tree.sql(dialect=dialects.pop())


def _replace_views(tree: exp.Expression, db: str | None, registry: SourceRegistry,
                   visiting: set[tuple[str, str]], depth: int) -> bool:
    """Replace the views ``tree`` names, in place; whether it named any. ``visiting``: the
    views (project, name) in lower case being expanded, which none may read again."""
    changed = False
    for table, project in _maybe_views(tree, db):
        key = ((project or "").lower(), table.name.lower())
        if key in visiting or depth >= MAX_DEPTH:
            raise SqlError(ErrorCode.INVALID_STATEMENT,
                           f"View {project}.{table.name} reads itself (through "
                           f"{', '.join('.'.join(k) for k in sorted(visiting))})")
        view = find_view(project, table.name) \
            if project and registry.get(project) is None else None
        if view is None:
            continue
        inner = _expanded(view["query"], project, view["database"], registry,
                          visiting | {key}, depth + 1)
        alias = table.alias or table.name
        table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(
            this=exp.to_identifier(alias))))
        changed = True
    return changed


def _find(project: Project, name: str) -> SqlView | None:
    return db.session.scalar(select(SqlView).where(SqlView.project_id == project.id,
                                                   SqlView.name_key == lookup_key(name)))


def _entry(row: SqlView) -> dict[str, Any]:
    return {"name": row.name, "query": row.query, "database": row.database}
