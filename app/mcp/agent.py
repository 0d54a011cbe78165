"""An agent as an MCP tool set: each of its skills is a tool.

A ``sql`` skill becomes a query tool limited to the tables its ``params`` list (``database``
and ``tables``; an agent's own ``data.tables``, MindsDB's ``["db.table", …]``, make one more
such tool per database). The limit is enforced on the statement itself, not asked of the
model: the text passes the gate (which parses it in the source's dialect, checks it reads
only, and regenerates it), then every table the regenerated statement — the very text that
runs — reads must be on the allow-list. The statement then runs as any other, with the
caller's rights, so a skill never reaches past what the person asking may read either.
"""

from __future__ import annotations

import re
from typing import Any

import mcp_types as types
import sqlglot
from sqlglot import exp

from ..errors import QuarryError
from ..services import access, audit, console
from ..services import agents as agent_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import gate
from . import tools
from .protocol import ToolSet
from .tools import Tool, ToolError


class SqlScope:
    """A database and the tables a skill may read in it (lower-case, as written:
    ``orders`` or ``schema.orders``)."""

    def __init__(self, database: str, tables: list[str]) -> None:
        self.database = database
        self.tables = sorted({t.lower() for t in tables})

    def check(self, query: str) -> None:
        """Refuse ``query`` unless it reads only this scope's tables (SqlError: the gate's
        own refusals, or ACCESS_DENIED for a table outside the scope)."""
        registry = access.queryable_sources()
        gated = gate(query, registry, self.database)
        if gated.source is None:
            return  # no table at all (SELECT 1)
        if gated.source.name.lower() != self.database.lower():
            raise self._outside(f"the data source {gated.source.name}")
        tree = sqlglot.parse_one(gated.sql, read=gated.source.sqlglot_dialect)
        ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
        for table in tree.find_all(exp.Table):
            name, schema = table.name.lower(), table.db.lower()
            if not table.catalog and not schema and name in ctes:
                continue  # a name the statement itself defines (its tables are checked)
            qualified = f"{schema}.{name}" if schema else name
            # A table written with its source's default schema (public.orders) is orders.
            plain = schema == self._default_schema(gated.source) and name in self.tables
            if not name or table.catalog or qualified not in self.tables and not plain:
                raise self._outside(f"the table {table.sql()}" if name else
                                    "a table function")

    @staticmethod
    def _default_schema(source: Any) -> str:
        return "public" if source.dialect == "postgresql" else ""

    def _outside(self, what: str) -> SqlError:
        return SqlError(ErrorCode.ACCESS_DENIED,
                        f"This skill reads only {', '.join(self.tables) or 'no tables'} in "
                        f"{self.database}: the statement reads {what}")


class KbScope:
    """The knowledge base a ``knowledge_base`` skill searches (its ``params.source``, in
    the agent's project unless written ``project.kb``)."""

    def __init__(self, project: str, source: str) -> None:
        self.project, _, self.name = source.rpartition(".")
        self.project = self.project or project


def _tool_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", text)[:64]


def _scopes(view: dict[str, Any], project: str
            ) -> list[tuple[str, str, SqlScope | KbScope | None, str]]:
    """(tool name, skill name, scope or None for a skill Quarry cannot run, skill type)."""
    found: list[tuple[str, str, SqlScope | KbScope | None, str]] = []
    for skill in view["skills"]:
        params = skill.get("params") or {}
        if skill["type"] == "knowledge_base" and isinstance(params.get("source"), str):
            found.append((f"search_{skill['name']}", skill["name"],
                          KbScope(project, params["source"]), "knowledge_base"))
        elif skill["type"] == "sql" and isinstance(params.get("database"), str):
            tables = [t for t in params.get("tables") or [] if isinstance(t, str)]
            found.append((f"query_{skill['name']}", skill["name"],
                          SqlScope(params["database"], tables), "sql"))
        else:
            found.append((f"skill_{skill['name']}", skill["name"], None, skill["type"]))
    by_db: dict[str, list[str]] = {}
    for item in ((view.get("data") or {}).get("tables") or []):
        if isinstance(item, str) and "." in item:
            database, _, table = item.partition(".")
            by_db.setdefault(database, []).append(table)
    for database, tables in by_db.items():
        found.append((f"query_{database}", f"data.tables of {view['name']}",
                      SqlScope(database, tables), "sql"))
    return found


def _columns_text(scope: SqlScope, schemas: dict[str, list | None]) -> str:
    """The scope's tables with their columns; ``schemas`` keeps each data source's catalog
    for the other skills of the same agent (one catalog query per source, not per skill)."""
    if scope.database not in schemas:
        try:
            schemas[scope.database] = console.schema(scope.database)["data_sources"]
        except QuarryError:
            schemas[scope.database] = None
    schema = schemas[scope.database]
    if schema is None:
        return " (the data source is not available to you)"
    lines = []
    for source in schema:
        for table in source["tables"]:
            if table["name"].lower() in scope.tables:
                columns = ", ".join(f"{c['name']} {c['type']}".strip() for c in table["columns"])
                lines.append(f"{table['name']}({columns})")
    return (" Tables: " + "; ".join(lines)) if lines else ""


def agent_tools(project: str, agent_name: str) -> ToolSet:
    """The tools of /mcp/projects/<project>/agents/<agent> (404 when there is no agent)."""
    return tool_set_of(agent_service.get_agent(project, agent_name), project)


def tool_set_of(view: dict[str, Any], project: str) -> ToolSet:
    """The tools of an agent (its view, as the agents service gives it)."""
    served: dict[str, Tool] = {}
    schemas: dict[str, list | None] = {}
    for name, skill, scope, kind in _scopes(view, project):
        name = _tool_name(name)
        if isinstance(scope, KbScope):
            served[name] = Tool(types.Tool(
                name=name, description=f"Search the knowledge base {scope.project}."
                                       f"{scope.name} (documents' text) by meaning: the "
                                       "best chunks first, with their document ids.",
                input_schema={"type": "object", "additionalProperties": False,
                              "properties": tools.SEARCH_ARGUMENTS, "required": ["text"]}),
                _kb_search(scope))
            continue
        if scope is None:
            served[name] = Tool(types.Tool(
                name=name, description=f"Skill {skill} (type {kind}): Quarry cannot run "
                                       "this type of skill yet; calling it answers an error.",
                input_schema={"type": "object"}), _cannot_run(skill, kind))
            continue
        served[name] = Tool(types.Tool(
            name=name,
            description=f"Run one read-only SQL SELECT on the data source {scope.database} "
                        f"(its dialect), reading only these tables.{_columns_text(scope, schemas)}",
            input_schema={"type": "object", "additionalProperties": False,
                          "properties": {"query": {"type": "string",
                                                   "description": "The SQL text"}},
                          "required": ["query"]}), _scoped_query(scope))
    return tools.tool_set(served, f"The skills of agent {view['name']} in project {project}, "
                                  "as tools. Every statement runs read-only with your rights.")


def _cannot_run(skill: str, kind: str):
    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        raise ToolError(f"Skill {skill} is of type {kind}, which Quarry cannot run yet")
    return run


def _kb_search(scope: KbScope):
    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        return tools.search_knowledge_base(scope.project, scope.name, arguments)
    return run


def _scoped_query(scope: SqlScope):
    def run(arguments: dict[str, Any]) -> dict[str, Any]:
        return run_scoped(scope, tools.text_argument(arguments, "query"))
    return run


def run_scoped(scope: SqlScope, query: str) -> dict[str, Any]:
    """A skill's statement: checked against its tables, then run as POST /api/sql/query."""
    try:
        scope.check(query)
    except SqlError as exc:
        audit.record_statement(query, scope.database, None, 0.0, "error", str(int(exc.code)),
                               history={"outcome": "error", "error_message": exc.message,
                                        "database": scope.database})
        raise ToolError(exc.message) from None
    return tools.run_sql(query, scope.database)
