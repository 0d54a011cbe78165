"""Jobs in MindsDB SQL: CREATE JOB, DROP JOB, SHOW JOBS, p.jobs, p.jobs_history and
log.jobs_history; and what a job's statements may be.

A job runs only what changes Quarry's own objects or reads (an allow-list): RETRAIN,
FINETUNE, INSERT INTO a knowledge base, CREATE VIEW / ALTER VIEW, CREATE [OR REPLACE] TABLE
files.<name> (SELECT …) (a snapshot of a query as a file), and SELECT. A write to a
data source, or any other statement, is refused when the job is created, naming the
statement. Each statement is checked with the creator's rights when the job is created
(the objects it names exist and the creator may change them; the databases it reads are
ones the creator may query) and again, by running it, as the creator at every run.

``{{START_DATETIME}}`` and ``{{PREVIOUS_START_DATETIME}}`` are replaced in the text before
a run (UTC, 'YYYY-MM-DD HH:MM:SS'). ``column > LAST`` in a SELECT's WHERE reads only the
rows past the largest value of ``column`` the job's previous good run read from that table
(``runs.py`` reads and keeps the values); the first run reads them all.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from mindsdb_sql_parser.ast import (
    BinaryOperation,
    CreateTable,
    Delete,
    Identifier,
    Insert,
    Select,
    Update,
)
from mindsdb_sql_parser.ast.base import ASTNode
from mindsdb_sql_parser.ast.mindsdb import (
    AlterView,
    CreateJob,
    CreateView,
    DropJob,
    FinetunePredictor,
    RetrainPredictor,
)
from mindsdb_sql_parser.ast.select.constant import Last
from mindsdb_sql_parser.lexer import MindsDBLexer
from sly.lex import LexError

from ..errors import NameTaken, Unprocessable
from ..federation.route import route
from ..services import access
from ..services import jobs as job_service
from ..services import models as model_service
from ..services import projects as project_service
from ..sql.errors import SqlError
from ..sql.files import FILES_SOURCE
from .context import Context, qualified
from .errors import if_clause, service_errors
from .knowledge_bases import target_knowledge_base
from .parser import NotParsed, mindsdb_leading_tokens, parse_mindsdb, parse_sql_cached
from .statements import ok_body

Body = dict[str, Any]
LOG_DATABASE = "log"
TEMPLATES = ("{{START_DATETIME}}", "{{PREVIOUS_START_DATETIME}}")
_ALLOWED = ("RETRAIN, FINETUNE, INSERT INTO a knowledge base, CREATE [OR REPLACE] VIEW, "
            "ALTER VIEW, CREATE TABLE files.<name> (SELECT …) and SELECT")
_SAMPLE_TIME = "2000-01-01 00:00:00"


def _labels(project: str, name: str):
    return service_errors({job_service.JobNotFound: qualified(project, name),
                           NameTaken: qualified(project, name)})


# --- statements ----------------------------------------------------------------------------------

def create(statement: CreateJob, ctx: Context) -> Body:
    project, name = ctx.split([str(p) for p in statement.name.parts], "job")
    with _labels(project, name), if_clause(bool(statement.if_not_exists), NameTaken):
        define(project, name, statement.query_str, statement.if_query_str,
               statement.start_str, statement.end_str, statement.repeat_str, ctx)
    return ok_body(ctx)


def drop(statement: DropJob, ctx: Context) -> Body:
    project, name = ctx.split([str(p) for p in statement.name.parts], "job")
    with _labels(project, name), \
            if_clause(bool(statement.if_exists), job_service.JobNotFound):
        job_service.drop_job(project, name)
    return ok_body(ctx)


def is_log_history(parts: list[str], ctx: Context) -> bool:
    """``log.jobs_history``: every job's runs the caller may see (MindsDB's log database),
    unless ``log`` is a data source or a project of that name."""
    return len(parts) == 2 and parts[0].lower() == LOG_DATABASE \
        and parts[1].lower() == "jobs_history" and not ctx.is_source(parts[0]) \
        and ctx.find_project(parts[0]) is None


# --- defining a job (SQL and REST) -----------------------------------------------------------

def define(project: str, name: str, query: str, if_query: str | None, start: Any,
           end: Any, every: str | None, ctx: Context) -> dict[str, Any]:
    """Check a job's statements and schedule with the caller's rights, then create it."""
    schedule = job_service.schedule_of(start, end, every)
    query = (query or "").strip()
    texts = split_statements(with_times(query, _SAMPLE_TIME, _SAMPLE_TIME))
    if not texts:
        raise Unprocessable("A job needs at least one statement", title="Invalid job",
                            errors={"query": ["no statement"]})
    owner = Context(db=project, registry=ctx.registry, params=None)
    for text in texts:
        check_statement(text, owner)
    if if_query is not None and if_query.strip():
        condition = _parse(with_times(if_query, _SAMPLE_TIME, _SAMPLE_TIME))
        if not isinstance(condition, Select):
            raise _refusal(if_query, "IF takes a SELECT: the statements run when it "
                           "returns rows")
        _check_reads(condition, owner)
    else:
        if_query = None
    return job_service.create_job(project, name, query, if_query, schedule)


def create_from_fields(project: str, fields: dict[str, Any]) -> dict[str, Any]:
    """POST /api/projects/<p>/jobs: the same checks as CREATE JOB, then the job."""
    ctx = Context(db=project, registry=access.queryable_sources())
    return define(project, fields["name"], fields["query"], fields.get("if_query"),
                  fields.get("start_at"), fields.get("end_at"), fields.get("schedule_str"),
                  ctx)


def split_statements(text: str) -> list[str]:
    """The statements of a job's text, split at the semicolons outside quotes and
    comments (as the MindsDB lexer reads it)."""
    pieces, begin = [], 0
    try:
        for token in MindsDBLexer().tokenize(text):
            if token.type == "SEMICOLON":
                pieces.append(text[begin:token.index])
                begin = token.index + 1
    except LexError as exc:
        raise Unprocessable(f"The job's statements cannot be read: {str(exc)[:200]}",
                            title="Invalid job", errors={"query": ["unreadable"]}) from None
    pieces.append(text[begin:])
    return [p.strip() for p in pieces if p.strip()]


def with_times(text: str, start: str, previous: str) -> str:
    return text.replace(TEMPLATES[0], start).replace(TEMPLATES[1], previous)


def _parse(text: str) -> Any:
    try:
        return parse_sql_cached(text)
    except NotParsed:
        try:
            parse_mindsdb(text)
        except SqlError as exc:
            raise _refusal(text, exc.message) from None
        raise _refusal(text, "the statement cannot be read") from None


def _parse_or_read(text: str, ctx: Context) -> Any | None:
    """The MindsDB tree of ``text``; None for a SELECT the MindsDB parser cannot read but
    the data path takes (a source's own dialect: WITH RECURSIVE …), checked by its gate."""
    try:
        return parse_sql_cached(text)
    except NotParsed:
        pass
    if mindsdb_leading_tokens(text, 1) in (["SELECT"], ["WITH"], ["LPAREN"]):
        try:
            route(text, ctx.registry, ctx.db)
        except SqlError as exc:
            raise _refusal(text, exc.message) from None
        return None
    return _parse(text)


def _refusal(text: str, why: str) -> Unprocessable:
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 120 else shown[:117] + "..."
    return Unprocessable(f"Statement '{shown}' cannot run in a job: {why}",
                         title="Statement not allowed in a job",
                         errors={"query": [f"not allowed: {shown}"]})


def check_statement(text: str, ctx: Context) -> Any:
    """The parsed statement when a job may run it and the caller could (Unprocessable, or
    the service's error, otherwise)."""
    tree = _parse_or_read(text, ctx)
    if tree is None:
        return None  # a read in a data source's own dialect, which the data path takes
    if isinstance(tree, RetrainPredictor | FinetunePredictor):
        project, model = ctx.split([str(p) for p in tree.name.parts], "model")
        project_service.get_project(project, "write")
        model_service.get_model(project, model)
    elif isinstance(tree, Insert):
        target = target_knowledge_base(tree, ctx)
        if target is None:
            raise _refusal(text, f"it writes to '{tree.table.to_string()}', which is not a "
                           "knowledge base: a job never writes to a data source")
        project_service.get_project(target[0], "write")
        if tree.from_select is not None:
            _check_reads(tree.from_select, ctx)
    elif isinstance(tree, CreateTable):
        parts = [str(p) for p in tree.name.parts]
        if parts[0].lower() != FILES_SOURCE or len(parts) != 2 or tree.from_select is None:
            raise _refusal(text, f"it writes to '{tree.name.to_string()}': a job never "
                           "writes to a data source (CREATE TABLE files.<name> (SELECT …) "
                           "stores a query's rows as a file)")
        access.require_admin("upload files")
        _check_reads(tree.from_select, ctx)
    elif isinstance(tree, CreateView | AlterView):
        project, _ = ctx.split([str(p) for p in tree.name.parts], "view")
        project_service.get_project(project, "write")
        _check_reads(_parse(tree.query_str), ctx)
    elif isinstance(tree, Select):
        _check_reads(tree, ctx)
    elif isinstance(tree, Update | Delete):
        raise _refusal(text, "it writes to a data source: a job never writes to one "
                       f"(a job runs {_ALLOWED})")
    else:
        raise _refusal(text, f"a job runs {_ALLOWED}")
    return tree


def _nodes(node: Any) -> Iterator[Any]:
    """Every AST node under ``node`` (itself included)."""
    if isinstance(node, ASTNode):
        yield node
        for value in vars(node).values():
            yield from _nodes(value)
    elif isinstance(node, list | tuple):
        for item in node:
            yield from _nodes(item)
    elif isinstance(node, dict):
        for item in node.values():
            yield from _nodes(item)


def _check_reads(select: Any, ctx: Context) -> None:
    """Every ``db.table`` a SELECT reads names a database the caller may read: a data
    source it may query, or a project it sees. LAST is on a plain table."""
    for node in _nodes(select):
        if isinstance(node, Select):
            for table in _tables(node.from_table):
                parts = [str(p) for p in table.parts]
                if len(parts) >= 2 and not ctx.is_source(parts[0]):
                    project_service.get_project(parts[0], "read")
            if last_terms(node) and not isinstance(node.from_table, Identifier):
                raise _refusal(node.to_string(), "LAST reads one table: write FROM db.table "
                               "(no JOIN or subquery) where LAST is used")


def _tables(node: Any) -> list[Identifier]:
    if isinstance(node, Identifier):
        return [node]
    found = []
    for attr in ("left", "right"):
        side = getattr(node, attr, None)
        if side is not None:
            found += _tables(side)
    return found


# --- LAST --------------------------------------------------------------------------------------

@dataclass
class LastTerm:
    node: BinaryOperation     # ``column > LAST``, rewritten in place before the run
    column: Identifier
    table: Identifier

    @property
    def key(self) -> str:
        return f"{self.table.to_string()}.{self.column.parts[-1]}".lower()


def _is_last(node: Any) -> bool:
    return isinstance(node, Last)


def last_terms(select: Select) -> list[LastTerm]:
    """The ``column > LAST`` (or ``>=``) conditions of one SELECT's WHERE."""
    if select.where is None:
        return []
    found = []
    for node in _nodes(select.where):
        if isinstance(node, BinaryOperation) and node.op in (">", ">=") \
                and _is_last(node.args[1]) and isinstance(node.args[0], Identifier) \
                and isinstance(select.from_table, Identifier):
            found.append(LastTerm(node, node.args[0], select.from_table))
    return found


def all_last_terms(tree: Any) -> list[LastTerm]:
    return [term for node in _nodes(tree) if isinstance(node, Select)
            for term in last_terms(node)]


def stored(value: Any) -> Any:
    """A value read by LAST as kept in the store (JSON): numbers and text as they are,
    times as 'YYYY-MM-DD HH:MM:SS[.ffffff]', anything else as its text."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float | str):
        return value
    if isinstance(value, datetime):
        value = value.astimezone(UTC).replace(tzinfo=None) if value.tzinfo else value
        return value.isoformat(sep=" ")
    return str(value)
