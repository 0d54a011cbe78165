"""MindsDB-dialect statements about the service's own objects (docs/mindsdb-sql.md).

``service_statement`` classifies a statement with ``mindsdb_sql_parser`` (the dialect's
own parser, not patterns on the text). A statement about projects, models, skills, agents
or ``information_schema`` is answered here, through the same service functions as the
REST routes; anything else — text the parser cannot read, a SELECT that only reads data
sources — returns None and goes on to the data path, which speaks the sources' dialects.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mindsdb_sql_parser.ast import (
    CreateTable,
    Delete,
    Describe,
    DropDatabase,
    DropTables,
    DropView,
    Identifier,
    Insert,
    Join,
    Select,
    Set,
    Show,
    Use,
)
from mindsdb_sql_parser.ast.mindsdb import (
    AlterDatabase,
    AlterKnowledgeBase,
    AlterView,
    CreateAgent,
    CreateDatabase,
    CreateJob,
    CreateKnowledgeBase,
    CreateKnowledgeBaseIndex,
    CreatePredictor,
    CreateSkill,
    CreateView,
    DropAgent,
    DropJob,
    DropKnowledgeBase,
    DropKnowledgeBaseIndex,
    DropPredictor,
    DropSkill,
    EvaluateKnowledgeBase,
    FinetunePredictor,
    RetrainPredictor,
)
from mindsdb_sql_parser.ast.select.union import CombiningQuery

from ..errors import ModelNotFound, ProjectNotFound
from ..federation import run as federation
from ..rules.names import AUDIT_TABLE, PROJECT_TABLES, SYSTEM_DATABASE
from ..services import knowledge_bases as kb_service
from ..services import models as model_service
from ..services import sqlviews as view_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.running import Statement
from ..sql.sources import SourceRegistry
from . import (
    agent_answers,
    databases,
    grants,
    jobs,
    knowledge_bases,
    predictions,
    statements,
    tables,
    unsupported,
    views,
)
from .context import Context
from .errors import service_errors
from .parser import NotParsed, mindsdb_leading_tokens, parse_mindsdb, parse_sql_cached
from .relation import Relation

__all__ = ["service_statement"]

_HANDLERS = {
    Show: statements.show,
    CreateDatabase: databases.create_database,   # a project, or a data source with ENGINE
    DropDatabase: databases.drop_database,
    DropTables: databases.drop_tables,
    CreateTable: databases.create_table,   # files.<name> (SELECT …); else the data path
    AlterDatabase: databases.alter_database,
    CreatePredictor: statements.create_model,
    DropPredictor: statements.drop_model,
    Describe: databases.describe,
    CreateSkill: statements.create_skill,
    DropSkill: statements.drop_skill,
    CreateAgent: statements.create_agent,
    DropAgent: statements.drop_agent,
    RetrainPredictor: statements.retrain_model,
    FinetunePredictor: statements.retrain_model,
    Set: statements.set_statement,
    CreateView: views.create_view,
    AlterView: views.alter_view,
    DropView: views.drop_view,
    Use: databases.use,
    CreateKnowledgeBase: knowledge_bases.create,
    DropKnowledgeBase: knowledge_bases.drop,
    AlterKnowledgeBase: knowledge_bases.refuse,
    CreateKnowledgeBaseIndex: knowledge_bases.refuse,
    DropKnowledgeBaseIndex: knowledge_bases.refuse,
    EvaluateKnowledgeBase: knowledge_bases.refuse,
    CreateJob: jobs.create,
    DropJob: jobs.drop,
    # INSERT INTO / DELETE FROM a knowledge base; any other table: None, the data path
    Insert: knowledge_bases.insert,
    Delete: knowledge_bases.delete,
}


def service_statement(query: str, db: str, params: dict[str, Any] | None,
                      registry: SourceRegistry, statement: Statement | None = None
                      ) -> dict[str, Any] | None:
    """The answer to a statement about the service's objects, or None for the data path.
    ``statement``: the running statement (an insert into a knowledge base shows its
    progress on it, and stops when it is cancelled)."""
    ctx = Context(db=db, registry=registry, params=params, statement=statement, query=query)
    answer = grants.grant_statement(query, ctx)
    if answer is not None:
        return answer
    explained = federation.explained(query)
    if explained is not None:  # EXPLAIN of a SELECT that may read a knowledge base
        return _explain(explained, ctx)
    statement = _parse(query)
    if statement is None:
        return None
    unsupported.refuse_statement(statement)
    if isinstance(statement, Show) and (statement.category or "").upper() == "VIEWS":
        return views.show_views(statement, ctx)
    handler = _HANDLERS.get(type(statement))
    if handler is not None:
        return handler(statement, ctx)
    if isinstance(statement, Select):
        return _select(statement, ctx)
    if isinstance(statement, CombiningQuery):  # UNION, INTERSECT, EXCEPT
        return knowledge_bases.select_federated(statement, ctx)
    return None


def _explain(query: str, ctx: Context) -> dict[str, Any] | None:
    """EXPLAIN of a SELECT that reads a knowledge base; None for any other (the data path
    explains it)."""
    try:
        statement = parse_sql_cached(query)
    except NotParsed:
        return None
    if not isinstance(statement, Select | CombiningQuery):
        return None
    return knowledge_bases.explain_federated(statement, replace(ctx, query=query))


# First words of the statements this module owns: when the MindsDB parser cannot read one,
# its syntax error is the answer (the data path would only say "CREATE is refused").
_OWN_FIRST = {"SHOW", "DESCRIBE", "DESC", "RETRAIN", "FINETUNE", "EVALUATE", "USE"}
_OWN_VERBS = {"CREATE", "DROP", "ALTER", "UPDATE"}
_OWN_OBJECTS = {"MODEL", "PREDICTOR", "PROJECT", "DATABASE", "SKILL", "AGENT", "VIEW",
                "KNOWLEDGE_BASE", "JOB"}


def _parse(query: str) -> Any | None:
    try:
        return parse_sql_cached(query)
    except NotParsed:
        pass
    leading = mindsdb_leading_tokens(query)
    unsupported.refuse_leading(leading)
    words = [t for t in leading if t not in ("OR", "REPLACE")]
    owned = bool(words) and (words[0] in _OWN_FIRST or words[0] in _OWN_VERBS
                             and len(words) > 1 and words[1] in _OWN_OBJECTS)
    # Anything else goes on to the data path, which reads the source's own dialect.
    return parse_mindsdb(query) if owned else None  # raises SYNTAX in SQL words


def _select(statement: Select, ctx: Context) -> dict[str, Any] | None:
    source = statement.from_table
    if isinstance(source, Join):
        return _join(statement, source, ctx)
    if not isinstance(source, Identifier) or statement.cte:
        return knowledge_bases.select_federated(statement, ctx)  # a subquery may read one
    parts = [str(p) for p in source.parts]
    alias = source.alias.parts[-1] if source.alias is not None else None
    if len(parts) == 2 and parts[0].lower() == SYSTEM_DATABASE \
            or len(parts) == 1 and ctx.db.lower() == SYSTEM_DATABASE:
        return _info_schema(statement, parts[-1], alias, ctx)
    if len(parts) == 2 and [p.lower() for p in parts] == list(AUDIT_TABLE):
        return statements.select_table(statement, tables.audit_table(alias), ctx)
    if jobs.is_log_history(parts, ctx):
        with service_errors():
            relation = tables.jobs_history_table(None, alias or "jobs_history")
        return statements.select_table(statement, relation, ctx)
    found = _project_object(parts, ctx)
    if found is None:  # a data source's table; a subquery of its WHERE may read one
        return knowledge_bases.select_federated(statement, ctx)
    project, name = found
    if name.lower() in PROJECT_TABLES:
        with service_errors():
            relation = tables.project_table(project, name, alias)
        return statements.select_table(statement, relation, ctx)
    if name.lower() == "knowledge_bases" and not kb_service.is_knowledge_base(project, name):
        relation = tables.knowledge_bases_table([project], alias or "knowledge_bases")
        return statements.select_table(statement, relation, ctx)
    model = _model(project, name, ctx)
    readable = kb_service.find_readable(project, name) if model is None else None
    if readable is not None:
        return knowledge_bases.select(statement, project, name, alias, ctx, readable)
    if model is None:
        answered = _prediction_view(statement, project, name, alias, ctx)
        if answered is not None:
            return answered
        answered = agent_answers.answer_statement(statement, project, name, alias, ctx)
        if answered is not None:
            return answered
        unsupported.refuse_table(name)  # p.jobs, p.triggers …
        return None
    return predictions.predict_from_literals(statement, project, model, ctx)


def _info_schema(statement: Select, table: str, alias: str | None,
                 ctx: Context) -> dict[str, Any]:
    unsupported.refuse_table(table)
    if table.lower() not in tables.INFO_TABLES:
        raise SqlError(ErrorCode.UNKNOWN_TABLE,
                       f"Table not found: information_schema.{table} (tables: "
                       f"{', '.join(tables.INFO_TABLES)})")
    relation = tables.info_schema_table(table, ctx.registry)
    if alias:
        relation.qualifiers.add(alias.lower())
        for column in relation.columns:
            column.qualifier = alias
    return statements.select_table(statement, relation, ctx)


def _project_object(parts: list[str], ctx: Context) -> tuple[str, str] | None:
    """(project, object) when ``parts`` names something in a project, else None; a model
    version is the object ``m.N`` (``p.m.N``, or ``m.N`` in the context project)."""
    if len(parts) in (2, 3) and parts[-1].isascii() and parts[-1].isdigit():
        version = f"{parts[-2]}.{parts[-1]}"
        if len(parts) == 3:
            project = None if ctx.is_source(parts[0]) else ctx.find_project(parts[0])
            return (project, version) if project else None
        if not ctx.is_source(ctx.db) and not ctx.is_source(parts[0]):
            project = ctx.find_project(ctx.db)
            return (project, version) if project else None
        return None
    if len(parts) == 2:
        if ctx.is_source(parts[0]):
            return None
        project = ctx.find_project(parts[0])
        return (project, parts[1]) if project else None
    if len(parts) == 1:
        if ctx.is_source(ctx.db):
            return None
        project = ctx.find_project(ctx.db)
        return (project, parts[0]) if project else None
    return None


def _model(project: str, name: str, ctx: Context | None = None):
    found = ctx.project_row(project) if ctx is not None else None
    if found is not None:  # looked up already by this statement
        return model_service.model_of(found, name)
    try:
        return model_service.get_model(project, name)
    except (ModelNotFound, ProjectNotFound):
        return None


def _prediction_view(statement: Select, project: str, name: str, alias: str | None,
                     ctx: Context) -> dict[str, Any] | None:
    """``SELECT … FROM p.v`` where view ``v`` JOINs a model (MindsDB's prediction view):
    the view's prediction, then the statement over its rows; None for any other name."""
    view = view_service.find_view(project, name)
    if view is None or view["database"] is not None:
        return None
    try:
        inner = parse_sql_cached(view["query"])
    except NotParsed:
        return None
    if not isinstance(inner, Select) or not isinstance(inner.from_table, Join):
        return None
    answer = _join(inner, inner.from_table, Context(db=project, registry=ctx.registry,
                                                    params=ctx.params))
    if answer is None:
        return None
    relation = Relation.of(answer["column_names"], [tuple(row) for row in answer["data"]],
                           alias or name)
    return statements.select_table(statement, relation, ctx)


def _join(statement: Select, join: Join, ctx: Context) -> dict[str, Any] | None:
    """A JOIN with a model on either side is a batch prediction; other JOINs are data.

    A side written ``project.name`` that is neither a model nor a view of the project is a
    model that does not exist (NOT_FOUND naming it and its project), not a data source."""
    missing = None
    for model_side, other in ((join.right, join.left), (join.left, join.right)):
        if not isinstance(model_side, Identifier):
            continue
        parts = [str(p) for p in model_side.parts]
        found = _project_object(parts, ctx)
        if found is None or found[1].lower() in PROJECT_TABLES:
            continue
        model = _model(*found)
        if model is not None:
            return predictions.predict_join(statement, other, model_side, found[0], model, ctx)
        if len(parts) > 1 and missing is None and view_service.find_view(*found) is None:
            missing = found
    answered = knowledge_bases.select_federated(statement, ctx)  # one beside tables
    if answered is not None:
        return answered
    if missing is not None:
        with service_errors():
            raise ModelNotFound(missing[1], missing[0])
    return None


# First words of a statement an AI may run through MCP or an agent: reads, and the data
# writes the gate refuses itself (so that they get the SQL endpoint's own message).
_READ_FIRST = {"SELECT", "SHOW", "DESCRIBE", "DESC", "WITH", "LPAREN", "EXPLAIN"}
_DATA_WRITES = {"DELETE", "INSERT", "UPDATE", "REPLACE"}


def refuse_changes(query: str) -> None:
    """Refuse a statement that would change the service's own objects (CREATE, DROP, GRANT,
    RETRAIN, SET …): through MCP and agents every statement is a read, whatever rights the
    caller holds over projects."""
    words = mindsdb_leading_tokens(query, 2)
    if not words:
        return  # empty or unreadable: the SQL path reports it as it does for everyone
    first = words[0]
    if first in _READ_FIRST or first in _DATA_WRITES and not (
            first == "UPDATE" and len(words) > 1 and words[1] in _OWN_OBJECTS):
        return
    raise SqlError(ErrorCode.READ_ONLY,
                   "Only statements that read (SELECT, SHOW, DESCRIBE) run here: an MCP "
                   "client or an agent cannot create, change or drop anything")
