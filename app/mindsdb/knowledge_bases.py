"""Knowledge bases in MindsDB SQL: CREATE / DROP / DESCRIBE KNOWLEDGE_BASE, INSERT INTO and
DELETE FROM a knowledge base, and searching one with SELECT.

``SELECT … FROM p.kb WHERE content = '…' [AND <id or metadata column> <op> … AND relevance
>= x AND hybrid_search_alpha = a AND hybrid_search = true AND reranking = false] [LIMIT n]``
answers MindsDB's columns, best first; without ``content`` it lists the chunks the filters
keep. Each statement calls the service the REST routes call (services/knowledge_bases.py).
"""

from __future__ import annotations

from typing import Any

from mindsdb_sql_parser.ast import (
    BinaryOperation,
    Constant,
    Delete,
    Describe,
    Identifier,
    Insert,
    Select,
    Tuple,
)
from mindsdb_sql_parser.ast.mindsdb import CreateKnowledgeBase, DropKnowledgeBase

from ..errors import NameTaken, ProjectNotFound
from ..kb.index import OPERATORS, Filter
from ..schemas.knowledge_bases import KnowledgeBaseOptions
from ..services import knowledge_bases as kb_service
from ..sql.errors import ErrorCode, SqlError
from . import tables
from .context import Context, qualified
from .errors import if_clause, service_errors
from .parser import plain
from .relation import Relation, conjuncts, constant_int, run_select
from .statements import ok_body, table_body

Body = dict[str, Any]
# Default of hybrid_search_alpha when only hybrid_search = true is given.
_HYBRID_ALPHA = 0.5


def _split(identifier: Identifier, ctx: Context) -> tuple[str, str]:
    return ctx.split([str(p) for p in identifier.parts], "knowledge base")


def _errors(project: str, name: str):
    return service_errors({kb_service.KnowledgeBaseNotFound: qualified(project, name),
                           NameTaken: qualified(project, name), ProjectNotFound: project})


def create(statement: CreateKnowledgeBase, ctx: Context) -> Body:
    project, name = _split(statement.name, ctx)
    if statement.from_query is not None:
        raise SqlError(ErrorCode.UNSUPPORTED, "CREATE KNOWLEDGE_BASE … FROM (SELECT …) is not "
                       "supported: create it, then INSERT INTO it SELECT …")
    if statement.model is not None:
        raise SqlError(ErrorCode.UNSUPPORTED, f"model = {statement.model.to_string()}: "
                       "a knowledge base's embeddings come from embedding_model = {…} (the "
                       "embedded model by default), not from a project's model")
    using = {str(k).lower(): plain(v) for k, v in (statement.params or {}).items()}
    if statement.storage is not None:
        using["storage"] = statement.storage.to_string()
    if "model" in using and "embedding_model" not in using:
        using["embedding_model"] = using.pop("model")  # MindsDB's older spelling
    with _errors(project, name), if_clause(bool(statement.if_not_exists), NameTaken):
        options = KnowledgeBaseOptions().load(using)
        kb_service.create_knowledge_base(project, name, options)
    return ok_body(ctx)


def drop(statement: DropKnowledgeBase, ctx: Context) -> Body:
    project, name = _split(statement.name, ctx)
    with _errors(project, name), \
            if_clause(bool(statement.if_exists), kb_service.KnowledgeBaseNotFound):
        kb_service.drop_knowledge_base(project, name)
    return ok_body(ctx)


def describe(statement: Describe, ctx: Context) -> Body:
    project, name = _split(statement.value, ctx)
    with _errors(project, name):
        kb = kb_service.get_knowledge_base(project, name)
    return table_body(tables.KNOWLEDGE_BASE_COLUMNS, [tables.knowledge_base_row(kb)], ctx)


def refuse(statement: Any, ctx: Context) -> Body:
    """ALTER KNOWLEDGE_BASE, CREATE / DROP INDEX ON KNOWLEDGE_BASE, EVALUATE KNOWLEDGE_BASE."""
    raise SqlError(ErrorCode.UNSUPPORTED, f"{type(statement).__name__} is not supported: "
                   "knowledge bases are created, dropped, inserted into, deleted from and "
                   "searched (docs/knowledge_bases.md)")


def target_knowledge_base(statement: Insert | Delete, ctx: Context) -> tuple[str, str] | None:
    """(project, name) when the statement's table is a knowledge base the caller sees."""
    parts = [str(p) for p in statement.table.parts]
    if len(parts) == 1:
        parts = [ctx.db, parts[0]]
    if len(parts) != 2:
        return None
    project = ctx.find_project(parts[0])
    if project is None or not kb_service.is_knowledge_base(project, parts[1]):
        return None
    return project, parts[1]


def insert(statement: Insert, ctx: Context) -> Body | None:
    """INSERT INTO p.kb (…) VALUES (…) or INSERT INTO p.kb SELECT …; None for any other
    table (the data path refuses writes to data sources)."""
    target = target_knowledge_base(statement, ctx)
    if target is None:
        return None
    project, name = target
    progress = _progress(ctx)
    with _errors(project, name):
        if statement.from_select is not None:
            kb_service.insert_query(project, name, statement.from_select.to_string(), ctx.db,
                                    progress)
        else:
            kb_service.insert_rows(project, name, _values(statement), progress)
    return ok_body(ctx)


def _progress(ctx: Context):
    """After each batch: the rows written so far, shown by GET /api/sql/queries; a cancel
    (DELETE /api/sql/queries/<id>) stops the insert there, the batches before it kept."""
    running = ctx.statement
    if running is None:
        return None

    def report(rows: int) -> None:
        running.rows_sent = rows
        if running.was_stopped():
            raise SqlError(ErrorCode.CANCELLED, f"The insert was cancelled after {rows} "
                           "rows (they are kept)")
    return report


def _values(statement: Insert) -> list[dict[str, Any]]:
    if not statement.columns:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "INSERT INTO a knowledge base names its "
                       "columns: INSERT INTO p.kb (id, content, …) VALUES (…)")
    names = [str(getattr(c, "name", c)) for c in statement.columns]
    rows = []
    for values in statement.values or []:
        if len(values) != len(names):
            raise SqlError(ErrorCode.INVALID_STATEMENT, f"{len(values)} values for "
                           f"{len(names)} columns ({', '.join(names)})")
        rows.append({n: _constant(v, n) for n, v in zip(names, values, strict=True)})
    return rows


def _constant(node: Any, column: str) -> Any:
    if isinstance(node, Constant):
        return node.value
    raise SqlError(ErrorCode.INVALID_STATEMENT,
                   f"The value of {column} is not a constant: {node.to_string()}")


def delete(statement: Delete, ctx: Context) -> Body | None:
    """DELETE FROM p.kb WHERE id = … (or metadata conditions); None for another table."""
    target = target_knowledge_base(statement, ctx)
    if target is None:
        return None
    project, name = target
    search = _search_terms(statement.where)
    if statement.where is None or search["content"] is not None or not search["filters"]:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "DELETE FROM a knowledge base takes "
                       "conditions on its id or metadata columns: DELETE FROM p.kb WHERE "
                       "id = …")
    with _errors(project, name):
        kb_service.delete_documents(project, name, search["filters"])
    return ok_body(ctx)


def select(statement: Select, project: str, name: str, alias: str | None,
           ctx: Context) -> Body:
    """A search (WHERE content = '…') or a listing of the knowledge base's chunks."""
    if statement.group_by or statement.having:
        raise SqlError(ErrorCode.UNSUPPORTED, "GROUP BY and HAVING are not supported on a "
                       "knowledge base")
    terms = _search_terms(statement.where)
    limit = constant_int(statement.limit, "LIMIT")
    offset = constant_int(statement.offset, "OFFSET") or 0
    if limit is not None and limit < 0:
        raise SqlError(ErrorCode.INVALID_STATEMENT, "LIMIT must not be negative")
    wanted = None if limit is None else limit + offset
    if wanted is None and terms["content"] is not None:
        wanted = kb_service.DEFAULT_LIMIT + offset
    with _errors(project, name):
        hits = kb_service.search(project, name, content=terms["content"],
                                 filters=terms["filters"], min_relevance=terms["relevance"],
                                 alpha=terms["alpha"], limit=wanted)
    columns = list(kb_service.HIT_COLUMNS)
    relation = Relation.of(columns, [tuple(h[c] for c in columns) for h in hits],
                           qualifier=alias or name)
    names, rows = run_select(statement, relation, where=False)
    return table_body(names, rows, ctx)


def _search_terms(where: Any) -> dict[str, Any]:
    terms: dict[str, Any] = {"content": None, "filters": [], "relevance": None,
                             "alpha": None}
    hybrid = False
    for condition in conjuncts(where):
        column, op, value = _condition(condition)
        key = column.lower()
        if key == "content":
            if op != "=" or not isinstance(value, str):
                raise SqlError(ErrorCode.INVALID_STATEMENT,
                               "content is searched with content = 'text'")
            terms["content"] = value
        elif key == "relevance":
            if op not in (">=", ">") or not _number(value):
                raise SqlError(ErrorCode.INVALID_STATEMENT,
                               "relevance is filtered with relevance >= number")
            terms["relevance"] = float(value)
        elif key == "hybrid_search_alpha":
            if op != "=" or not _number(value) or not 0 <= float(value) <= 1:
                raise SqlError(ErrorCode.INVALID_STATEMENT,
                               "hybrid_search_alpha takes = a number from 0 to 1")
            terms["alpha"] = float(value)
        elif key == "hybrid_search":
            hybrid = _flag(op, value, key)
        elif key == "reranking":
            if _flag(op, value, key):
                raise SqlError(ErrorCode.UNSUPPORTED, "reranking is not available yet: "
                               "leave it out or write reranking = false")
        elif key in ("distance", "chunk_id", "chunk_content", "metadata"):
            raise SqlError(ErrorCode.INVALID_STATEMENT,
                           f"{column} cannot be filtered on; filter on relevance, the id "
                           "or a metadata column")
        else:
            terms["filters"].append(Filter("id" if key == "id" else column, op, value))
    if hybrid and terms["alpha"] is None:
        terms["alpha"] = _HYBRID_ALPHA
    if terms["content"] is None and (terms["alpha"] is not None
                                     or terms["relevance"] is not None):
        raise SqlError(ErrorCode.INVALID_STATEMENT, "relevance and hybrid search need a "
                       "search text: WHERE content = '…'")
    return terms


def _condition(node: Any) -> tuple[str, str, Any]:
    """(column, operator, value) of ``column <op> constant`` (or a list for IN)."""
    if isinstance(node, BinaryOperation) and node.op.lower() in OPERATORS:
        column, value = node.args
        op = node.op.lower()
        if isinstance(column, Constant) and isinstance(value, Identifier) \
                and op in ("=", "!=", "<>"):
            column, value = value, column
        if isinstance(column, Identifier):
            name = str(column.parts[-1])
            if isinstance(value, Constant) and op not in ("in", "not in"):
                return name, op, value.value
            if isinstance(value, Tuple) and op in ("in", "not in") \
                    and all(isinstance(v, Constant) for v in value.items):
                return name, op, [v.value for v in value.items]
    raise SqlError(ErrorCode.UNSUPPORTED, "A knowledge base's WHERE joins conditions "
                   "column <op> constant (=, !=, <, <=, >, >=, LIKE, IN) with AND; got: "
                   f"{node.to_string()}")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _flag(op: str, value: Any, key: str) -> bool:
    if op != "=" or not isinstance(value, bool):
        raise SqlError(ErrorCode.INVALID_STATEMENT, f"{key} takes = true or = false")
    return value
