"""Knowledge bases in MindsDB SQL: CREATE / DROP / DESCRIBE KNOWLEDGE_BASE, INSERT INTO and
DELETE FROM a knowledge base, and searching one with SELECT.

``SELECT … FROM p.kb WHERE content = '…' [AND <id or metadata column> <op> … AND relevance
>= x AND hybrid_search_alpha = a AND hybrid_search = true AND reranking = false] [LIMIT n]``
answers MindsDB's columns, best first; without ``content`` it lists the chunks the filters
keep. Each statement calls the service the REST routes call (services/knowledge_bases.py).
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from flask import current_app
from mindsdb_sql_parser.ast import (
    BinaryOperation,
    Constant,
    Delete,
    Describe,
    Identifier,
    Insert,
    Join,
    Select,
    Tuple,
)
from mindsdb_sql_parser.ast.mindsdb import CreateKnowledgeBase, DropKnowledgeBase
from mindsdb_sql_parser.ast.select.union import CombiningQuery
from sqlglot import exp

from ..errors import NameTaken, ProjectNotFound
from ..federation import run as federation
from ..kb.index import OPERATORS, Filter
from ..schemas.knowledge_bases import KnowledgeBaseOptions
from ..services import knowledge_bases as kb_service
from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import parse_any
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
           ctx: Context, found: kb_service.Readable | None = None) -> Body:
    """A search (WHERE content = '…') or a listing of the knowledge base's chunks
    (``found``: as ``find_readable`` answered it)."""
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
                                 alpha=terms["alpha"], limit=wanted,
                                 reranking=terms["reranking"], found=found)
    columns = list(kb_service.HIT_COLUMNS)
    relation = Relation.of(columns, [tuple(h[c] for c in columns) for h in hits],
                           qualifier=alias or name)
    names, rows = run_select(statement, relation, where=False)
    return table_body(names, rows, ctx)


def _search_terms(where: Any) -> dict[str, Any]:
    return _terms(_condition(condition) for condition in conjuncts(where))


def _terms(conditions: Iterable[tuple[str, str, Any]]) -> dict[str, Any]:
    """The search of (column, operator, value) conditions joined by AND."""
    terms: dict[str, Any] = {"content": None, "filters": [], "relevance": None,
                             "alpha": None, "reranking": None}
    hybrid = False
    for column, op, value in conditions:
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
            terms["reranking"] = _flag(op, value, key)
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


# --- a knowledge base beside other tables ------------------------------------------------------

# The comparisons a condition on a knowledge base's search, id or metadata may use, as
# sqlglot reads them (NOT IN and NOT LIKE are these under a NOT).
_GLOT_OPERATORS = {exp.EQ: "=", exp.NEQ: "!=", exp.LT: "<", exp.LTE: "<=", exp.GT: ">",
                   exp.GTE: ">=", exp.Like: "like", exp.In: "in"}


@dataclass
class _Search:
    """A knowledge base of a statement over several sources: its search, made before the
    legs are read, whose hits fill the engine table ``key``."""

    project: str
    name: str
    alias: str
    key: str
    terms: dict[str, Any]
    wanted: int
    found: kb_service.Readable

    @property
    def label(self) -> str:
        return f"the hits of knowledge base {self.project}.{self.name}"


def select_federated(select: Select | CombiningQuery, ctx: Context) -> Body | None:
    """A SELECT that reads a knowledge base beside data-source tables (a JOIN, a subquery,
    a CTE, a UNION): each knowledge base is searched first, with the conditions on it
    (``kb.content = '…'``, metadata, relevance …), and its hits stand in the statement as
    a table, which the federation engine joins to the others (and uses to cut a leg joined
    to them on the id: ``federation/dynamic.py``). None when the statement reads no
    knowledge base."""
    prepared = _prepare(select, ctx)
    if prepared is None:
        return None
    statement, dialect, searches = prepared
    most = current_app.config["FEDERATION_MAX_LEG_ROWS"]
    given = {search.key: _searched(search, most) for search in searches}
    config = current_app.config
    limits = federation.Limits(timeout_s=None, max_rows=config["SQL_MAX_ROWS"],
                               max_bytes=config["SQL_MAX_RESPONSE_BYTES"],
                               max_leg_rows=most, params=ctx.params)
    result = federation.federated_select(statement.sql(dialect=dialect), ctx.registry,
                                         ctx.registry.get(ctx.db), limits, ctx.statement,
                                         given)
    body = table_body(result.columns, result.rows, ctx)
    # Which engine joined it, as a statement over data sources alone says (Spark's answer
    # differs: a JSON column is its text there).
    body["context"].update(federation.engine_context(result.engine, result.note))
    if result.truncated:
        body["truncated"] = True
    return body


def explain_federated(select: Select | CombiningQuery, ctx: Context) -> Body | None:
    """EXPLAIN of a SELECT that reads a knowledge base (``ctx.query``: the SELECT): a step
    per knowledge base's search (not run: which base, its conditions, how many hits),
    then the legs and the engine as for any statement over several sources. None when the
    statement reads no knowledge base."""
    prepared = _prepare(select, ctx)
    if prepared is None:
        return None
    statement, dialect, searches = prepared
    columns = list(kb_service.HIT_COLUMNS)
    given = {s.key: federation.Given(columns, [], s.label) for s in searches}
    steps = federation.explain(statement.sql(dialect=dialect), ctx.registry,
                               ctx.registry.get(ctx.db), None, ctx.statement, ctx.params,
                               given)
    rows = [(f"search {i}: {s.alias}; knowledge base {s.project}.{s.name}, up to "
             f"{s.wanted} hits, handed to the engine as {s.key}",
             f"{s.project}.{s.name}", _search_sql(s)) for i, s in enumerate(searches, 1)]
    return table_body(federation.EXPLAIN_COLUMNS, rows + steps, ctx)


def _prepare(select: Select | CombiningQuery, ctx: Context
             ) -> tuple[exp.Expression, str, list[_Search]] | None:
    """The statement (sqlglot's tree, and its dialect) with each knowledge base replaced by
    the engine table its hits will fill, the conditions on it taken out; the searches.
    None when it reads no knowledge base."""
    if not ctx.query or not _names_project_tables(select, ctx):
        return None
    try:
        statement, dialect = parse_any(ctx.query, ctx.registry)
    except SqlError:
        return None
    found = [(table, kb) for table in statement.find_all(exp.Table)
             if (kb := _knowledge_base(table, statement, ctx)) is not None]
    if not found:
        return None
    most = current_app.config["FEDERATION_MAX_LEG_ROWS"]
    searches = []
    for table, (project, name, readable) in found:
        alias = table.alias_or_name
        terms = _terms(_pulled(table, alias))
        key = f"quarry_kb_{secrets.token_hex(4)}_{len(searches)}"
        searches.append(_Search(project, name, alias, key, terms,
                                _hits_wanted(table, terms, most), readable))
        table.replace(exp.Table(this=exp.to_identifier(key),
                                alias=exp.TableAlias(this=exp.to_identifier(alias))))
    return statement, dialect, searches


def _searched(search: _Search, most: int) -> federation.Given:
    """The hits of one knowledge base, as the engine's table."""
    terms = search.terms
    with _errors(search.project, search.name):
        hits = kb_service.search(search.project, search.name, content=terms["content"],
                                 filters=terms["filters"], min_relevance=terms["relevance"],
                                 alpha=terms["alpha"], limit=search.wanted,
                                 reranking=terms["reranking"], found=search.found)
    if terms["content"] is None and len(hits) >= search.wanted:
        raise SqlError(ErrorCode.TOO_MANY_ROWS, f"Knowledge base {search.project}."
                       f"{search.name} lists more than {most} chunks "
                       "(FEDERATION_MAX_LEG_ROWS) in this statement; search it (content = "
                       "'…') or filter on its metadata")
    columns = list(kb_service.HIT_COLUMNS)
    # The metadata object is of the engine's JSON type: json_extract_string reads it, and
    # the answer gives it back as the object a search alone answers.
    return federation.Given(columns, [tuple(hit[c] for c in columns) for hit in hits],
                            search.label, json=("metadata",))


# Search text longer than this is cut in EXPLAIN (it is no secret, but a step stays short).
_SHOWN_TEXT = 60


def _search_sql(search: _Search) -> str:
    """The search as a statement on the knowledge base alone (its text shortened)."""
    terms = search.terms
    conditions: list[exp.Expression] = []
    if terms["content"] is not None:
        text = terms["content"]
        if len(text) > _SHOWN_TEXT:
            text = text[:_SHOWN_TEXT - 1] + "…"
        conditions.append(exp.column("content").eq(exp.Literal.string(text)))
    for found in terms["filters"]:
        conditions.append(_filter_sql(found))
    if terms["relevance"] is not None:
        conditions.append(exp.column("relevance") >= terms["relevance"])
    if terms["alpha"] is not None:
        conditions.append(exp.column("hybrid_search_alpha").eq(terms["alpha"]))
    if terms["reranking"] is not None:
        conditions.append(exp.column("reranking").eq(exp.Boolean(this=terms["reranking"])))
    select = exp.select("*").from_(exp.table_(search.name, db=search.project))
    if conditions:
        select = select.where(exp.and_(*conditions))
    return select.limit(search.wanted).sql()


def _filter_sql(found: Filter) -> exp.Expression:
    column = exp.column(found.field)
    op = {"<>": "!="}.get(found.op.lower(), found.op.lower())
    if op in ("in", "not in"):
        condition: exp.Expression = column.isin(*[exp.convert(v) for v in found.value])
    else:
        kind = next(k for k, v in _GLOT_OPERATORS.items() if v == op.removeprefix("not "))
        condition = kind(this=column, expression=exp.convert(found.value))
    return exp.not_(condition) if op.startswith("not ") else condition


def _names_project_tables(node: Any, ctx: Context) -> bool:
    """Whether a SELECT's tables (its FROM tree: tables, joins, subqueries; the subqueries
    of its WHERE; its CTEs; both sides of a UNION, INTERSECT or EXCEPT) name one that is no
    data source's: the cheap test before the statement is read again for knowledge
    bases."""
    if isinstance(node, Identifier):
        parts = [str(p) for p in node.parts]
        return not ctx.is_source(parts[0] if len(parts) > 1 else ctx.db)
    if isinstance(node, Join):
        return _names_project_tables(node.left, ctx) or \
            _names_project_tables(node.right, ctx)
    if isinstance(node, CombiningQuery):
        return _names_project_tables(node.left, ctx) or \
            _names_project_tables(node.right, ctx)
    if isinstance(node, Select):
        return _names_project_tables(node.from_table, ctx) or any(
            _names_project_tables(inner, ctx) for inner in _subselects(node.where)) or \
            any(_names_project_tables(cte.query, ctx) for cte in node.cte or ())
    return False


def _subselects(node: Any) -> list[Select]:
    """The SELECTs inside a condition (``x IN (SELECT …)``, ``EXISTS (SELECT …)``)."""
    if isinstance(node, Select):
        return [node]
    args = getattr(node, "args", None)
    children = [*(args if isinstance(args, list | tuple) else ()),
                getattr(node, "query", None)]
    found: list[Select] = []
    for child in children:
        if child is not None and not isinstance(child, str | int | float | bool):
            found += _subselects(child)
    return found


def _knowledge_base(table: exp.Table, statement: exp.Expression, ctx: Context
                    ) -> tuple[str, str, kb_service.Readable] | None:
    """(project, name, as ``find_readable`` found it) when ``table`` is a knowledge base
    the caller may read."""
    if not table.name or table.catalog:
        return None
    if table.db:
        project = ctx.find_project(table.db)
    elif table.name.lower() in {c.alias_or_name.lower() for c in statement.find_all(exp.CTE)}:
        return None
    else:
        project = ctx.find_project(ctx.db)
    readable = kb_service.find_readable(project, table.name) if project is not None \
        else None
    if readable is None:
        return None
    return project, table.name, readable


def _pulled(table: exp.Table, alias: str) -> list[tuple[str, str, Any]]:
    """The conditions on the knowledge base ``alias`` that its search takes, taken out of the
    WHERE of its SELECT and the ON of its own JOIN (each left there as TRUE)."""
    select = table.find_ancestor(exp.Select)
    places = [select.args.get("where") if select is not None else None]
    if isinstance(table.parent, exp.Join):
        places.append(table.parent.args.get("on"))
    # Alone in its SELECT (a CTE, a subquery), its columns need no qualifier.
    alone = select is not None and not select.args.get("joins") and \
        isinstance(table.parent, exp.From)
    pulled = []
    for place in places:
        if place is None:
            continue
        root = place.this if isinstance(place, exp.Where) else place
        for conjunct in list(root.flatten() if isinstance(root, exp.And) else [root]):
            condition = _glot_condition(conjunct, alias, alone)
            if condition is not None:
                pulled.append(condition)
                conjunct.replace(exp.true())
    return pulled


def _glot_condition(node: exp.Expression, alias: str, alone: bool
                    ) -> tuple[str, str, Any] | None:
    """(column, operator, value) of a condition on the knowledge base's search words, id or
    metadata (``alone``: unqualified columns are its own); None for one the engine
    evaluates (another table's, or the hits' own columns); UNSUPPORTED for a search word
    or metadata column in another form."""
    negated = isinstance(node, exp.Not) and isinstance(node.this, exp.In | exp.Like)
    inner = node.this if negated else node
    op = _GLOT_OPERATORS.get(type(inner))

    def mine(column: exp.Column) -> bool:
        return column.table.lower() == alias.lower() or (alone and not column.table)

    columns = [c for c in inner.find_all(exp.Column) if mine(c)]
    if not columns:
        return None
    column = inner.this if op is not None else None
    value = _glot_value(inner, op)
    own = set(kb_service.HIT_COLUMNS) - {"id", "relevance"}  # the hits' own columns
    if isinstance(column, exp.Column) and mine(column) \
            and value is not _NO_VALUE and len(columns) == 1:
        return None if column.name.lower() in own else \
            (column.name, f"not {op}" if negated else op, value)
    if {c.name.lower() for c in columns} <= own | {"id"}:
        return None  # a join on the id, a condition on the hits: the engine's
    raise SqlError(ErrorCode.UNSUPPORTED, f"A condition on knowledge base {alias}'s "
                   "search, id or metadata is written column <op> constant (=, !=, <, "
                   f"<=, >, >=, LIKE, IN) and joined with AND; got: {node.sql()}")


_NO_VALUE = object()


def _glot_value(node: exp.Expression, op: str | None) -> Any:
    if op == "in":
        values = [_literal(v) for v in node.expressions]
        return _NO_VALUE if not values or _NO_VALUE in values else values
    if op is None:
        return _NO_VALUE
    return _literal(node.expression)


def _literal(node: Any) -> Any:
    if isinstance(node, exp.Boolean):
        return node.this
    if isinstance(node, exp.Neg) and isinstance(node.this, exp.Literal) \
            and not node.this.is_string:
        value = _literal(node.this)
        return _NO_VALUE if value is _NO_VALUE else -value
    if isinstance(node, exp.Literal):
        if node.is_string:
            return node.this
        text = node.this
        try:
            return int(text)
        except ValueError:
            try:
                return float(text)
            except ValueError:
                return _NO_VALUE
    return _NO_VALUE


def _hits_wanted(table: exp.Table, terms: dict[str, Any], most: int) -> int:
    """How many hits a knowledge base brings into the statement: a search, its default
    number or the statement's LIMIT (and OFFSET) when larger; a listing, all up to the leg
    limit (one more, to tell when it is reached)."""
    if terms["content"] is None:
        return most + 1
    select = table.find_ancestor(exp.Select)
    wanted = kb_service.DEFAULT_LIMIT
    if select is not None and select.args.get("limit") is not None:
        count = _literal(select.args["limit"].expression)
        offset = select.args.get("offset")
        skip = _literal(offset.expression) if offset is not None else 0
        if isinstance(count, int) and isinstance(skip, int):
            wanted = max(wanted, count + skip)
    return min(wanted, most)
