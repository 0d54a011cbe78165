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

from ..errors import NameTaken, ProjectNotFound
from ..services import sqlviews as view_service
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
    return view_service.expand(query, db, ctx.registry)
