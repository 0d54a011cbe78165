"""One small function per MindsDB statement about projects, models, skills and agents.

Each calls the service function the matching REST route calls (one rule, one place) and
returns the answer body of API.md §1 (``type`` table or ok).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from mindsdb_sql_parser.ast import (
    BinaryOperation,
    Constant,
    Describe,
    DropDatabase,
    Identifier,
    Select,
    Set,
    Show,
    Star,
)
from mindsdb_sql_parser.ast.mindsdb import (
    CreateAgent,
    CreateDatabase,
    CreatePredictor,
    CreateSkill,
    DropAgent,
    DropPredictor,
    DropSkill,
    FinetunePredictor,
    RetrainPredictor,
)

from ..errors import (
    AgentNotFound,
    ModelNotFound,
    NameTaken,
    ObjectNotFound,
    ProjectNotFound,
    QuarryError,
    SkillNotFound,
)
from ..rules.names import PROJECT_TABLES
from ..schemas.agents import AgentFields
from ..schemas.skills import SkillFields
from ..services import agents as agent_service
from ..services import models as model_service
from ..services import projects as project_service
from ..services import skills as skill_service
from ..services import sqlviews as view_service
from ..services import training as training_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.execute import fetch_rows
from . import tables
from .context import Context, qualified
from .errors import if_clause, service_errors
from .models import training_spec
from .parser import plain
from .relation import Relation, filter_rows, like_regex, run_select

Body = dict[str, Any]
PROJECT_ENGINES = (None, "mindsdb")


def table_body(columns: list[str], rows: list[tuple[Any, ...]], ctx: Context) -> Body:
    return {"type": "table", "column_names": columns, "data": [list(r) for r in rows],
            "context": {"db": ctx.db}}


def ok_body(ctx: Context) -> Body:
    return {"type": "ok", "column_names": [], "context": {"db": ctx.db}}


def relation_body(relation: Relation, ctx: Context) -> Body:
    return table_body([c.name for c in relation.columns], relation.rows, ctx)


def _name(identifier: Identifier) -> list[str]:
    return [str(p) for p in identifier.parts]


@contextlib.contextmanager
def _about(project: str, name: str, outcome: type[QuarryError], *, accept: bool = False
           ) -> Iterator[None]:
    """Service calls about ``project.name``: their errors answered as SQL errors that name the
    object as the statement wrote it; ``outcome`` (the object missing, or its name taken) is
    no error when the statement's IF [NOT] EXISTS accepts it."""
    with service_errors({outcome: qualified(project, name), ProjectNotFound: project}), \
            if_clause(accept, outcome):
        yield


# --- SHOW ------------------------------------------------------------------------------------

def show(statement: Show, ctx: Context) -> Body:
    category = (statement.category or "").upper()
    handler = _SHOW.get(category)
    if handler is None:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"SHOW {category} is not supported; supported: "
                       f"{', '.join('SHOW ' + c for c in _SHOW)}")
    relation, like_column = handler(statement, ctx)
    if statement.like is not None:
        pattern = like_regex(str(statement.like))
        index = relation.require([like_column])
        relation = Relation(relation.columns,
                            [r for r in relation.rows if pattern.fullmatch(str(r[index]))],
                            qualifiers=relation.qualifiers)
    relation = filter_rows(relation, statement.where)
    return relation_body(relation, ctx)


def _shown_project(statement: Show, ctx: Context) -> str:
    source = statement.from_table or statement.in_table
    return ctx.project(_name(source)[-1] if source is not None else None)


def _show_databases(statement: Show, ctx: Context) -> tuple[Relation, str]:
    full = "FULL" in [str(m).upper() for m in statement.modes or []]
    databases = tables.databases_table(ctx.registry)
    rows = [(r[0], r[1], r[2]) if full else (r[0],) for r in databases.rows]
    return Relation.of(["Database", "TYPE", "ENGINE"] if full else ["Database"], rows), \
        "Database"


def _show_projects(statement: Show, ctx: Context) -> tuple[Relation, str]:
    return Relation.of(["project"], [(n,) for n in tables.project_names()]), "project"


# The tables of a data source, in its own dialect (mindsdb_sdk's database.tables.list()
# sends SHOW TABLES with the data source as context.db).
_SOURCE_TABLES_SQL = {
    "sqlite": "SELECT name FROM sqlite_master WHERE type IN ('table', 'view') "
              "AND name NOT LIKE 'sqlite_%' ORDER BY name",
    "postgresql": "SELECT table_name FROM information_schema.tables "
                  "WHERE table_schema = current_schema() ORDER BY table_name",
    "mysql": "SELECT table_name FROM information_schema.tables "
             "WHERE table_schema = DATABASE() ORDER BY table_name",
}


def _show_source_tables(name: str, ctx: Context) -> tuple[Relation, str]:
    source = ctx.registry.require(name)
    column = f"Tables_in_{source.name}"
    if source.catalog is not None:  # a source that lists its own tables (uploaded files)
        return Relation.of([column], [(t["name"],) for t in source.catalog()]), column
    _, rows = fetch_rows(source.name, _SOURCE_TABLES_SQL[source.dialect],
                         max_rows=source.max_rows, registry=ctx.registry)
    column = f"Tables_in_{source.name}"
    return Relation.of([column], [(r[0],) for r in rows]), column


def _show_tables(statement: Show, ctx: Context) -> tuple[Relation, str]:
    shown = statement.from_table or statement.in_table
    shown_name = _name(shown)[-1] if shown is not None else ctx.db
    if ctx.is_source(shown_name):
        return _show_source_tables(shown_name, ctx)
    project = _shown_project(statement, ctx)
    # A model is queried as a table of its project (SELECT … FROM p.m), so it is listed too.
    names = list(PROJECT_TABLES)
    names += [m.name for m in model_service.list_models(project) if m.active]
    names += [v["name"] for v in view_service.list_views(project)]  # read as tables too
    column = f"Tables_in_{project}"
    return Relation.of([column], [(n,) for n in dict.fromkeys(names)]), column


def _show_kind(table: str):
    def handler(statement: Show, ctx: Context) -> tuple[Relation, str]:
        return tables.project_table(_shown_project(statement, ctx), table), "NAME"
    return handler


def _show_jobs(statement: Show, ctx: Context) -> tuple[Relation, str]:
    with service_errors():
        return tables.jobs_table([_shown_project(statement, ctx)]), "NAME"


def _show_knowledge_bases(statement: Show, ctx: Context) -> tuple[Relation, str]:
    return tables.knowledge_bases_table([_shown_project(statement, ctx)]), "NAME"


# SHOW SCHEMAS is SHOW DATABASES in MindsDB (as in MySQL).
_SHOW = {"DATABASES": _show_databases, "SCHEMAS": _show_databases,
         "PROJECTS": _show_projects, "TABLES": _show_tables,
         "MODELS": _show_kind("models"), "PREDICTORS": _show_kind("models"),
         "SKILLS": _show_kind("skills"), "AGENTS": _show_kind("agents"),
         "JOBS": _show_jobs,
         "KNOWLEDGE_BASES": _show_knowledge_bases, "KNOWLEDGE BASES": _show_knowledge_bases}


# --- SELECT over a catalogue table -----------------------------------------------------------

def select_table(statement: Select, relation: Relation, ctx: Context) -> Body:
    names, rows = run_select(statement, relation)
    return table_body(names, rows, ctx)


# --- projects --------------------------------------------------------------------------------

def create_project(statement: CreateDatabase, ctx: Context) -> Body:
    name = _name(statement.name)
    engine = str(statement.engine).lower() if statement.engine is not None else None
    if engine not in PROJECT_ENGINES:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"Cannot create database '{'.'.join(name)}' with ENGINE = "
                       f"'{statement.engine}': data sources are configured "
                       "(QUARRY_DATA_SOURCES), not created by SQL; only projects "
                       "(CREATE PROJECT p, or ENGINE = 'mindsdb') are")
    if len(name) != 1:
        raise SqlError(ErrorCode.INVALID_STATEMENT, f"Invalid project name '{'.'.join(name)}'")
    with service_errors({NameTaken: name[0]}), if_clause(statement.if_not_exists, NameTaken):
        project_service.create_project(name[0])
    return ok_body(ctx)


def drop_project(statement: DropDatabase, ctx: Context) -> Body:
    name = _name(statement.name)[-1]
    if ctx.is_source(name):
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"'{name}' is a data source: data sources are configured "
                       "(QUARRY_DATA_SOURCES), not dropped by SQL")
    with service_errors({ProjectNotFound: name}), \
            if_clause(statement.if_exists, ProjectNotFound):
        project_service.delete_project(name)
    return ok_body(ctx)


# --- models ----------------------------------------------------------------------------------

def create_model(statement: CreatePredictor, ctx: Context) -> Body:
    project, name = ctx.split(_name(statement.name), "model")
    with _about(project, name, NameTaken):
        model = training_service.create_model(training_spec(statement, project))
        stored = ctx.project(project)
    return table_body(tables.MODEL_RECORD_COLUMNS,
                      [tables.model_row(model, stored, tables.MODEL_RECORD_COLUMNS)], ctx)


def retrain_model(statement: RetrainPredictor | FinetunePredictor, ctx: Context) -> Body:
    """RETRAIN / FINETUNE [p.]m[.N] [FROM source (SELECT …)] [USING …]: version N+1."""
    project, ref = ctx.split(_name(statement.name), "model")
    name, version = model_service.split_ref(ref)
    source = statement.integration_name
    spec = training_service.RetrainSpec(
        project=project, name=name, version=version, query=statement.query_str or None,
        source=str(source.parts[-1]) if source is not None else None,
        using={str(k).lower(): plain(v) for k, v in (statement.using or {}).items()},
        finetune=isinstance(statement, FinetunePredictor))
    with _about(project, name, ModelNotFound):
        model = training_service.retrain_model(spec)
        stored = ctx.project(project)
    return table_body(tables.MODEL_RECORD_COLUMNS,
                      [tables.model_row(model, stored, tables.MODEL_RECORD_COLUMNS)], ctx)


def set_statement(statement: Set, ctx: Context) -> Body | None:
    """SET model_active = [p.]m.N (MindsDB's SQL) or SET active p.m.N (mindsdb_sdk's).

    Other SET statements are not about models: None sends them on to the data path.
    """
    name = _name(statement.name)[-1].lower() if isinstance(statement.name, Identifier) else None
    category = (statement.category or "").lower()
    if not (name == "model_active" or category == "active" and statement.name is None):
        return None
    if not isinstance(statement.value, Identifier):
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       "SET model_active takes a model version: SET model_active = p.m.N")
    project, ref = ctx.split(_name(statement.value), "model")
    name, version = model_service.split_ref(ref)
    if version is None:
        raise SqlError(ErrorCode.INVALID_STATEMENT,
                       f"SET model_active needs a version number: {ref}.N")
    with _about(project, ref, ModelNotFound):
        model_service.set_active_version(project, name, version)
    return ok_body(ctx)


def drop_model(statement: DropPredictor, ctx: Context) -> Body:
    project, ref = ctx.split(_name(statement.name), "model")
    with _about(project, ref, ModelNotFound, accept=statement.if_exists):
        model_service.delete_model(project, ref)
    return ok_body(ctx)


def describe(statement: Describe, ctx: Context) -> Body:
    kind = (statement.type or "MODEL").upper()
    if kind not in ("MODEL", "PREDICTOR"):
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"DESCRIBE {kind} is not supported; DESCRIBE [MODEL] p.m[.attribute] is")
    parts = _name(statement.value)
    if ctx.is_source(parts[0]) and len(parts) > 1:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"'{parts[0]}' is a data source: DESCRIBE describes models")
    attribute = None
    if len(parts) > 1 and parts[-1].isascii() and parts[-1].isdigit() \
            or len(parts) == 4 and parts[2].isascii() and parts[2].isdigit():
        # p.m.N, m.N (a version), p.m.N.attribute
        if len(parts) == 4:
            attribute = parts[3]
        project, name = ctx.split(parts[:3], "model")
    elif len(parts) == 3:
        project, name, attribute = parts
    elif len(parts) == 2 and ctx.find_project(parts[0]) is None \
            and parts[1].lower() in model_service.ATTRIBUTES:
        (project, name), attribute = (ctx.db, parts[0]), parts[1]
    else:
        project, name = ctx.split(parts, "model")
    with _about(project, name, ModelNotFound):
        if attribute is not None:
            records = model_service.describe_model(project, name, attribute)
            return _records_body(records, attribute.lower(), ctx)
        model = model_service.get_model(project, name)
        stored = ctx.project(project)
    row = (list(model_service.ATTRIBUTES),
           *tables.model_row(model, stored, tables.MODEL_RECORD_COLUMNS))
    return table_body(["TABLES", *tables.MODEL_RECORD_COLUMNS], [row], ctx)


# MindsDB's column order for each describe attribute; keys beyond these follow.
_DESCRIBE_COLUMNS = {
    "info": ["accuracies", "column_importances", "outputs", "inputs"],
    "features": ["column", "type", "encoder", "role"],
    "model": ["name", "performance", "training_time", "selected", "accuracy_functions"],
}


def _records_body(records: list[dict[str, Any]], attribute: str, ctx: Context) -> Body:
    columns = [c for c in _DESCRIBE_COLUMNS[attribute] if any(c in r for r in records)]
    for record in records:
        columns += [k for k in record if k not in columns]
    return table_body(columns, [tuple(r.get(c) for c in columns) for r in records], ctx)


# --- skills and agents ----------------------------------------------------------------------

def create_skill(statement: CreateSkill, ctx: Context) -> Body:
    project, name = ctx.split(_name(statement.name), "skill")
    params = plain(dict(statement.params or {}))
    skill_type = plain(statement.type) if statement.type is not None else params.pop("type", None)
    with _about(project, name, NameTaken, accept=statement.if_not_exists):
        data = SkillFields().load({"name": name, "type": skill_type, "params": params})
        skill_service.create_skill(project, data)
    return ok_body(ctx)


# USING keys of CREATE AGENT that are fields of the agent record, not entries of params.
_AGENT_FIELDS = ("skills", "provider", "model_name", "prompt_template", "data")


def create_agent(statement: CreateAgent, ctx: Context) -> Body:
    project, name = ctx.split(_name(statement.name), "agent")
    params = plain(dict(statement.params or {}))
    data: dict[str, Any] = {"name": name}
    for key in _AGENT_FIELDS:
        if key in params:
            data[key] = params.pop(key)
    if isinstance(statement.model, dict):
        data["model"] = plain(statement.model)
    elif statement.model is not None:
        data["model_name"] = str(statement.model)
    if params:
        data["params"] = params
    with _about(project, name, NameTaken, accept=statement.if_not_exists):
        agent_service.create_agent(project, AgentFields().load(data))
    return ok_body(ctx)


def _drop(kind: str, missing: type[ObjectNotFound], delete: Callable[[str, str], None]
          ) -> Callable[[DropSkill | DropAgent, Context], Body]:
    """DROP SKILL / DROP AGENT [IF EXISTS] [p.]name: the REST route's delete."""
    def drop(statement: DropSkill | DropAgent, ctx: Context) -> Body:
        project, name = ctx.split(_name(statement.name), kind)
        with _about(project, name, missing, accept=statement.if_exists):
            delete(project, name)
        return ok_body(ctx)
    return drop


drop_skill = _drop("skill", SkillNotFound, skill_service.delete_skill)
drop_agent = _drop("agent", AgentNotFound, agent_service.delete_agent)


def equality_row(where: Any) -> dict[str, Any]:
    """``a = 1 AND b = 'x'`` → {"a": 1, "b": "x"}: the input row of a prediction."""
    if where is None:
        return {}
    if isinstance(where, BinaryOperation) and where.op.lower() == "and":
        row = equality_row(where.args[0])
        row.update(equality_row(where.args[1]))
        return row
    if isinstance(where, BinaryOperation) and where.op == "=":
        column, value = where.args
        if isinstance(value, Identifier) and isinstance(column, Constant):
            column, value = value, column
        if isinstance(column, Identifier) and not isinstance(column.parts[-1], Star) \
                and isinstance(value, Constant):
            return {str(column.parts[-1]): value.value}
    raise SqlError(ErrorCode.UNSUPPORTED,
                   "A prediction from a model reads its input from WHERE column = value "
                   f"conditions joined by AND; got: {where.to_string()}")
