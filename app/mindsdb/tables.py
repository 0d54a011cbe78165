"""The service's own objects as tables, in the column names and order MindsDB answers.

Rows come from the same service functions as the REST routes (``list_models``,
``list_skills`` …), so what SQL shows is what REST shows. Secrets inside ``params`` are
masked exactly as in REST (``rules.secrets.mask``).
"""

from __future__ import annotations

import json
from typing import Any

from flask import current_app

from ..rules.names import SYSTEM_DATABASE
from ..rules.secrets import mask
from ..services import access, audit
from ..services import agents as agent_service
from ..services import databases as database_service
from ..services import jobs as job_service
from ..services import knowledge_bases as kb_service
from ..services import models as model_service
from ..services import projects as project_service
from ..services import skills as skill_service
from ..sql.sources import SourceRegistry
from ..store import MLModel
from .errors import service_errors
from .relation import Relation

INFO_TABLES = ("databases", "models", "skills", "agents", "knowledge_bases")

MODEL_COLUMNS = ["NAME", "ENGINE", "PROJECT", "ACTIVE", "VERSION", "STATUS", "ACCURACY",
                 "PREDICT", "UPDATE_STATUS", "MINDSDB_VERSION", "ERROR", "SELECT_DATA_QUERY",
                 "TRAINING_OPTIONS", "CURRENT_TRAINING_PHASE", "TOTAL_TRAINING_PHASES",
                 "TRAINING_PHASE_NAME", "TAG", "CREATED_AT", "TRAINING_TIME"]
# What CREATE MODEL and DESCRIBE answer: the record without the training progress.
MODEL_RECORD_COLUMNS = ["NAME", "ENGINE", "PROJECT", "ACTIVE", "VERSION", "STATUS", "ACCURACY",
                        "PREDICT", "UPDATE_STATUS", "MINDSDB_VERSION", "ERROR",
                        "SELECT_DATA_QUERY", "TRAINING_OPTIONS", "TAG"]
SKILL_COLUMNS = ["NAME", "PROJECT", "TYPE", "PARAMS"]
AGENT_COLUMNS = ["NAME", "PROJECT", "MODEL_NAME", "SKILLS", "PARAMS"]
DATABASE_COLUMNS = ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
JOB_COLUMNS = ["NAME", "PROJECT", "START_AT", "END_AT", "NEXT_RUN_AT", "SCHEDULE_STR",
               "QUERY", "IF_QUERY", "CREATED_BY"]
HISTORY_COLUMNS = ["NAME", "PROJECT", "SLOT_AT", "START_AT", "END_AT", "OUTCOME",
                   "DURATION_S", "ERROR", "QUERY"]
KNOWLEDGE_BASE_COLUMNS = ["NAME", "PROJECT", "EMBEDDING_MODEL", "RERANKING_MODEL", "STORAGE",
                          "METADATA_COLUMNS", "CONTENT_COLUMNS", "ID_COLUMN", "PARAMS",
                          "DOCUMENTS", "CHUNKS"]


def knowledge_base_row(kb: dict[str, Any]) -> tuple[Any, ...]:
    """A knowledge base (the service's description) as SHOW KNOWLEDGE_BASES shows it."""
    storage = f"{kb['vector_database']}.{kb['vector_database_table']}" \
        if kb["vector_database"] else None
    return (kb["name"], kb["project"], kb["embedding_model"], None, storage,
            kb["metadata_columns"], kb["content_columns"], kb["id_column"], kb["params"],
            kb["documents"], kb["chunks"])


def knowledge_bases_table(projects: list[str], qualifier: str | None = None) -> Relation:
    """SHOW KNOWLEDGE_BASES, p.knowledge_bases and information_schema.knowledge_bases."""
    with service_errors():
        rows = [knowledge_base_row(kb) for project in projects
                for kb in kb_service.list_knowledge_bases(project)]
    return Relation.of(KNOWLEDGE_BASE_COLUMNS, rows, qualifier)


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=False)


_PHASES = {"queued": 1, "reading": 2, "fitting": 3, "complete": 4}


def model_values(model: MLModel, project: str) -> dict[str, Any]:
    """One model as MindsDB's columns (values as REST shows them)."""
    complete = model.status == "complete"
    phase = (model.progress or {}).get("phase")
    return {
        "NAME": model.name, "ENGINE": model.engine, "PROJECT": project,
        "ACTIVE": model.active, "VERSION": model.version, "STATUS": model.status,
        "ACCURACY": model.accuracy, "PREDICT": model.predict, "UPDATE_STATUS": "up_to_date",
        "MINDSDB_VERSION": current_app.config.get("API_VERSION"), "ERROR": model.error,
        "SELECT_DATA_QUERY": model.fetch_data_query,
        "TRAINING_OPTIONS": _json(model.training_options or {}),
        # Phases queued, reading, fitting, complete (MindsDB numbers its phases the same way).
        "CURRENT_TRAINING_PHASE": 4 if complete else _PHASES.get(phase),
        "TOTAL_TRAINING_PHASES": 4,
        "TRAINING_PHASE_NAME": "complete" if complete else phase,
        "TAG": None, "CREATED_AT": model.created_at, "TRAINING_TIME": model.training_time,
    }


def model_row(model: MLModel, project: str, columns: list[str]) -> tuple[Any, ...]:
    values = model_values(model, project)
    return tuple(values[c] for c in columns)


def models_table(projects: list[str], qualifier: str = "models") -> Relation:
    rows = []
    for project in projects:
        rows.extend(model_row(m, project, MODEL_COLUMNS)
                    for m in model_service.list_models(project))
    return Relation.of(MODEL_COLUMNS, rows, qualifier)


def skills_table(projects: list[str], qualifier: str = "skills") -> Relation:
    rows = []
    for project in projects:
        rows.extend((name, project, kind, params)
                    for name, kind, params in skill_service.skill_summaries(project))
    return Relation.of(SKILL_COLUMNS, rows, qualifier)


def agent_row(agent: dict[str, Any], project: str) -> tuple[Any, ...]:
    return (agent["name"], project, agent["model_name"],
            [skill["name"] for skill in agent["skills"]], _json(mask(agent["params"] or {})))


def agents_table(projects: list[str], qualifier: str = "agents") -> Relation:
    rows = []
    for project in projects:
        rows.extend(agent_row(a, project) for a in agent_service.list_agents(project))
    return Relation.of(AGENT_COLUMNS, rows, qualifier)


def project_names() -> list[str]:
    return [p.name for p in project_service.list_projects()]


def connection_data(registry: SourceRegistry, name: str) -> dict[str, Any]:
    """A data source's connection parameters, the password masked (API.md: write-only)."""
    source = registry.get(name)
    return database_service.connection_data(source.info if source else {})


def databases_table(registry: SourceRegistry) -> Relation:
    """information_schema, then the projects, then the data sources (MindsDB's order)."""
    rows: list[tuple[Any, ...]] = [(SYSTEM_DATABASE, "system", None, None)]
    rows += [(name, "project", None, None) for name in project_names()]
    rows += [(name, "data", engine, _json(connection_data(registry, name)))
             for name, engine in registry.describe() if access.may_query(name)]
    return Relation.of(DATABASE_COLUMNS, rows, "databases")


def info_schema_table(table: str, registry: SourceRegistry) -> Relation:
    name = table.lower()
    if name == "databases":
        return databases_table(registry)
    if name == "knowledge_bases":
        return knowledge_bases_table(project_names(), name)
    builders = {"models": models_table, "skills": skills_table, "agents": agents_table}
    return builders[name](project_names(), name)


def jobs_table(projects: list[str], qualifier: str = "jobs") -> Relation:
    """p.jobs and SHOW JOBS: in mindsdb_sdk's columns (it lower-cases them)."""
    rows = [tuple(job[c.lower()] for c in JOB_COLUMNS) for project in projects
            for job in job_service.list_jobs(project)]
    return Relation.of(JOB_COLUMNS, rows, qualifier)


def jobs_history_table(projects: list[str] | None, qualifier: str = "jobs_history"
                       ) -> Relation:
    """p.jobs_history, or log.jobs_history (``projects`` None: every project the caller
    sees), newest first."""
    runs = job_service.visible_history() if projects is None else \
        [run for project in projects for run in job_service.history(project)]
    rows = [tuple(run[c.lower()] for c in HISTORY_COLUMNS) for run in runs]
    return Relation.of(HISTORY_COLUMNS, rows, qualifier)


def project_table(project: str, table: str, qualifier: str | None = None) -> Relation:
    builders = {"models": models_table, "skills": skills_table, "agents": agents_table,
                "jobs": jobs_table, "jobs_history": jobs_history_table}
    return builders[table.lower()]([project], qualifier or table.lower())


def audit_table(alias: str | None = None) -> Relation:
    """quarry.audit: the newest records (at most SQL_MAX_ROWS), for admins only."""
    with service_errors():
        access.require_admin("read the audit log")
    limit = current_app.config["SQL_MAX_ROWS"]
    rows = [tuple(_json(v) if c in ("before", "after") and v is not None else v
                  for c, v in zip(audit.COLUMNS, row, strict=True))
            for row in audit.rows_for_sql(limit)]
    return Relation.of([c.upper() for c in audit.COLUMNS], rows, alias or "audit")
