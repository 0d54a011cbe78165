"""Views in MindsDB SQL: CREATE / ALTER / DROP VIEW, and reading a view as a table.

A view is expanded where a statement names it: ``SELECT … FROM p.v WHERE …`` becomes
``SELECT … FROM (<the view's SELECT>) AS v WHERE …`` before the statement goes on to the
data path, so the gate, the caller's rights on every data source, the caps and the
federation apply to the expanded statement exactly as if the caller had written it: a view
never grants more than its reader has. A view may name other views (expanded in turn); a
cycle is refused when the view is created.
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser.ast import DropView, Identifier
from mindsdb_sql_parser.ast.mindsdb import AlterView, CreateView
from sqlglot import exp
from sqlglot.errors import SqlglotError

from ..errors import NameTaken, ProjectNotFound
from ..services import sqlviews as view_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.syntax import parse_sqlglot
from .context import Context, qualified
from .errors import if_clause, service_errors
from .statements import ok_body, table_body

Body = dict[str, Any]


def create_view(statement: CreateView, ctx: Context) -> Body:
    return _define(statement, ctx, replace=False, accept=bool(statement.if_not_exists))


def alter_view(statement: AlterView, ctx: Context) -> Body:
    return _define(statement, ctx, replace=True, accept=False)


def drop_view(statement: DropView, ctx: Context) -> Body:
    for identifier in statement.names:
        project, name = _split(identifier, ctx)
        with service_errors({view_service.ViewNotFound: qualified(project, name),
                             ProjectNotFound: project}), \
                if_clause(bool(statement.if_exists), view_service.ViewNotFound):
            view_service.drop_view(project, name)
    return ok_body(ctx)


def show_views(statement: Any, ctx: Context) -> Body:
    """SHOW VIEWS [FROM p]: the views of a project (the context's by default)."""
    shown = statement.from_table or statement.in_table
    project = str(shown.parts[-1]) if shown is not None else ctx.db
    with service_errors({ProjectNotFound: project}):
        rows = [[v["name"], v["query"]] for v in view_service.list_views(project)]
    return table_body(["name", "query"], rows, ctx)


def _define(statement: CreateView | AlterView, ctx: Context, *, replace: bool,
            accept: bool) -> Body:
    project, name = _split(statement.name, ctx)
    database = str(statement.from_table.parts[-1]) if statement.from_table is not None \
        else None
    query = statement.query_str
    with service_errors({NameTaken: qualified(project, name), ProjectNotFound: project}), \
            if_clause(accept, NameTaken):
        view_service.create_view(project, name, query, database, replace=replace)
    return ok_body(ctx)


def _split(identifier: Identifier, ctx: Context) -> tuple[str, str]:
    parts = [str(p) for p in identifier.parts]
    return ctx.split(parts, "view")


def expand(query: str, db: str, ctx: Context) -> str | None:
    """``query`` with every view it names replaced by its SELECT, or None when it names no
    view (then it goes on unchanged)."""
    try:
        parsed = parse_sqlglot(query, None)
    except SqlError:
        return None
    if len(parsed) != 1 or parsed[0] is None or not list(parsed[0].find_all(exp.Table)):
        return None
    tree = parsed[0]
    if not _replace_views(tree, db, None, ctx, set(), 0):
        return None
    return tree.sql()


def _expanded(query: str, project: str, database: str | None, ctx: Context,
              visiting: set[tuple[str, str]], depth: int) -> exp.Expression:
    try:
        parsed = parse_sqlglot(query, None)
    except SqlError as exc:
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"The view's statement cannot be read: {exc.message}") from None
    if len(parsed) != 1 or parsed[0] is None:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "A view holds exactly one SELECT")
    tree = parsed[0]
    _replace_views(tree, project, database, ctx, visiting, depth)
    return tree


def _replace_views(tree: exp.Expression, db: str, database: str | None, ctx: Context,
                   visiting: set[tuple[str, str]], depth: int) -> bool:
    """Replace the views ``tree`` names, in place; whether it named any. ``database``: the
    data source bare table names are in (CREATE VIEW … FROM db)."""
    changed = False
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in list(tree.find_all(exp.Table)):
        if table.catalog or not table.name:
            continue
        if not table.db and table.name.lower() in ctes:
            continue
        project = table.db or (db if database is None else None)
        key = ((project or "").lower(), table.name.lower())
        if key in visiting or depth >= view_service.MAX_DEPTH:
            raise SqlError(ErrorCode.INVALID_STATEMENT,
                           f"View {project}.{table.name} reads itself (through "
                           f"{', '.join('.'.join(k) for k in sorted(visiting))})")
        view = _view(project, table.name, ctx) if project else None
        if view is None:
            if database is not None and not table.db:
                table.set("db", exp.to_identifier(database))  # the FROM db of the view
                changed = True
            continue
        inner = _expanded(view["query"], project, view["database"], ctx, visiting | {key},
                          depth + 1)
        alias = table.alias or table.name
        try:
            table.replace(exp.Subquery(this=inner, alias=exp.TableAlias(
                this=exp.to_identifier(alias))))
        except SqlglotError as exc:  # pragma: no cover - sqlglot's own consistency
            raise SqlError(ErrorCode.QUERY_FAILED, str(exc)) from None
        changed = True
    return changed


def _view(project: str, name: str, ctx: Context) -> dict[str, Any] | None:
    if ctx.is_source(project):
        return None
    return view_service.find_view(project, name)
