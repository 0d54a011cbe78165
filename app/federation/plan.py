"""Split a federated SELECT into legs (one read-only query per table reference) and the
statement the engine runs over them.

The planner is sqlglot's own qualifier, not a planner of ours: every table reference is
renamed to the engine table its leg will fill (``leg_0``, ``leg_1`` …, keeping the alias the
statement gave it), the qualifier then expands ``*`` and gives every column its table alias,
and what each leg needs falls out of that:

- the columns: every column qualified with the leg's alias, anywhere in the statement;
- the filters: the WHERE conjuncts of the leg's own SELECT (and the ON conjuncts of its own
  join) that read only the leg's columns, with only comparisons, BETWEEN, IN lists, LIKE,
  IS [NOT] NULL and literals in them, and only where the leg's rows cannot come back as
  NULLs of an outer join. The engine applies the full statement again, so a source whose
  comparison is looser (MariaDB compares text without case) only sends a few more rows;
- a LIMIT when the leg is alone in its SELECT with nothing that could drop or reorder rows.

Anything else (joins, aggregates, windows, subqueries, set operations, functions) runs in
the engine, in DuckDB's dialect.
"""

from __future__ import annotations

import datetime
import itertools
import re
from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

import sqlglot
from sqlglot import exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify
from sqlglot.tokens import TokenType

from ..sql.errors import ErrorCode, SqlError
from ..sql.functions.duckdb import DuckDbPolicy
from ..sql.gate import check_calls, check_read_only, check_row_counts, parse_any
from ..sql.sources import DataSource, SourceRegistry

LEG_PREFIX = "leg_"
_GENERATED_NAME = re.compile(r"_col_\d+")
_WRITTEN = "quarry_written"  # meta of an alias the statement itself wrote


@dataclass
class Leg:
    """One table reference, read from its data source."""

    index: int
    source: DataSource
    table: exp.Table                 # as the source knows it (no source qualifier)
    alias: str                       # the alias the engine statement uses for its rows
    columns: list[str] = field(default_factory=list)
    # A leg that joins several tables of its source: all of them (table, alias), and where
    # each of its columns comes from (output name -> (alias, column)).
    joined: list[tuple[exp.Table, str]] = field(default_factory=list)
    origin: dict[str, tuple[str, str]] = field(default_factory=dict)
    filters: list[exp.Expression] = field(default_factory=list)
    limit: int | None = None
    sql: str = ""                    # in the source's dialect
    rows: int = 0                    # delivered so far
    # Per column (output name): "int" or "text" when the source declares such a type,
    # which a dynamic filter may compare with keys of another leg (``dynamic.py``).
    kinds: dict[str, str | None] = field(default_factory=dict)
    shape: str = ""                  # ``sql`` with every literal a '?': its size's key
    # Rows the source expects the leg to return, from its statistics (``sql/estimate.py``),
    # asked before the leg runs; None: not asked, or the source gave no figure.
    estimate: int | None = None
    dynamic: list[str] = field(default_factory=list)  # filters added at run time
    state: str = "waiting"           # then "running", "done"
    # The source's own names of its columns, by lower-cased name, per table alias of a leg
    # that joins several ("" for a leg of one table): the plan lower-cases names (the
    # engine ignores case), and a source where case matters (PostgreSQL's quoted
    # "customerId") is asked for each column by its own name.
    stored: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return f"{LEG_PREFIX}{self.index}"

    def label(self) -> str:
        glot = self.source.sqlglot_dialect
        tables = [table for table, _ in self.joined] or [self.table]
        return ", ".join(f"{self.source.name}.{table.sql(dialect=glot)}" for table in tables)


@dataclass
class Held:
    """A table the engine holds before any leg is read (rows Quarry made: a knowledge
    base's hits), which may give its keys to a leg it is joined to (``dynamic.py``)."""

    name: str                        # the engine table
    label: str                       # how EXPLAIN and the legs' filters name it

    @property
    def shape(self) -> str:
        return f"held:{self.label}"


@dataclass
class Link:
    """An equality between a column of ``source`` and one of ``target`` that every row of
    the answer holds where ``target`` is read (``dynamic.py``): the target's rows whose
    value is none of the source leg's values can be left in their database. The source
    may be a table the engine holds already (``Held``), whose keys are known at once."""

    source: Leg | Held
    source_column: str               # in the source leg's engine table
    target: Leg
    target_column: str               # in the target leg's engine table
    # The source leg's keys are most of the target column's values, by the sources'
    # statistics (``dynamic.estimate``): the filter would keep most rows, so no wait.
    covered: bool = False


@dataclass
class Plan:
    legs: list[Leg]
    engine_sql: str                  # DuckDB's dialect, over tables leg_0 …
    names: list[str | None]          # output names to show instead of DuckDB's (None: its own)
    links: list[Link] = field(default_factory=list)


@dataclass(frozen=True)
class Planned:
    """A statement as a process planned it last (``Engine.plans``): its parsed tree, the
    tables it read with what their sources said of them, and the plan. The plan is used
    again while every table is of the same source object with the same columns."""

    parsed: exp.Expression
    tables: list[tuple[DataSource, list[tuple[str, str | None]]]]
    plan: Plan

    def fits(self, tables: list[tuple[DataSource, list[tuple[str, str | None]]]]) -> bool:
        return len(tables) == len(self.tables) and all(
            source is kept_source and columns == kept_columns
            for (source, columns), (kept_source, kept_columns)
            in zip(tables, self.tables, strict=True))


def plan_key(query: str, context: DataSource | None, params: dict[str, Any] | None
             ) -> tuple | None:
    """What a kept plan is found by: the text, the context source, the parameters' values
    with their types (``True`` and ``1`` are different literals); None: not kept."""
    values = []
    for name, value in sorted((params or {}).items()):
        if not isinstance(value, str | int | float | bool) and value is not None:
            return None  # refused by ``parse``
        values.append((name, type(value).__name__, value))
    return query, context.name.lower() if context is not None else None, tuple(values)


def fresh(plan: Plan) -> Plan:
    """A copy of a kept plan for one run: legs of their own (a run notes its rows, state,
    estimate and dynamic filters on them), sharing what no run changes."""
    legs = [replace(leg, dynamic=[], rows=0, state="waiting", estimate=None)
            for leg in plan.legs]
    new = {id(old): leg for old, leg in zip(plan.legs, legs, strict=True)}
    links = [replace(link, source=new.get(id(link.source), link.source),
                     target=new[id(link.target)], covered=False) for link in plan.links]
    return Plan(legs, plan.engine_sql, plan.names, links)


# Describes a table: its columns, read from the source, each with the kind of key a dynamic
# filter may compare it with ("int", "text" or None) (raises SqlError).
Describe = Callable[[DataSource, exp.Table], list[tuple[str, str | None]]]


def parse(query: str, registry: SourceRegistry, params: dict[str, Any] | None = None
          ) -> exp.Expression:
    """The statement, parsed and checked read-only before anything reaches a source; its
    ``:name`` parameters become literals of the tree (sqlglot writes them quoted and
    escaped for each source and the engine, so a value never becomes SQL)."""
    statement, _ = parse_any(query, registry)
    check_read_only(statement, None)
    _bind(statement, params or {})
    # Every call runs in the engine (a leg only sends columns and comparisons): its own
    # allow-list, so that no statement reads the engine's settings, files or environment.
    check_calls(statement, DuckDbPolicy())
    check_row_counts(statement)  # after binding: a count given as a parameter is a literal now
    return statement


def _bind(statement: exp.Expression, params: dict[str, Any]) -> None:
    names = [node.name for node in statement.find_all(exp.Placeholder)]
    if any(not name or name == "?" for name in names):
        raise SqlError(ErrorCode.MISSING_PARAMETER,
                       "Positional placeholders (?) are not supported; use :name and give "
                       "params {\"name\": value}")
    missing = [name for name in dict.fromkeys(names) if name not in params]
    if missing:
        raise SqlError(ErrorCode.MISSING_PARAMETER,
                       "No value for parameter " + ", ".join(f":{n}" for n in missing)
                       + " in params")
    for node in list(statement.find_all(exp.Placeholder)):
        value = params[node.name]
        if not isinstance(value, str | int | float | bool) and value is not None:
            raise SqlError(ErrorCode.MISSING_PARAMETER,
                           f"Parameter :{node.name} must be a string, number, boolean or "
                           "null in a statement over several data sources")
        node.replace(exp.convert(value))


def warm(dialects: list[str]) -> None:
    """Parse, qualify and write one statement in each dialect (and the engine's): sqlglot
    builds each dialect's tables on first use, 0.7 s for four, which a preloading gunicorn
    master pays once for its workers instead of their first federated statements."""
    for dialect in dict.fromkeys([*dialects, "duckdb"]):
        statement = sqlglot.parse_one(
            "SELECT a.x, count(*) AS n FROM t AS a JOIN u AS b ON a.x = b.y "
            "WHERE a.z IN (1, 2) AND b.w LIKE 'v%' GROUP BY a.x", read=dialect)
        qualify(statement, schema={"t": {"x": "INT", "z": "INT"},
                                   "u": {"y": "INT", "w": "TEXT"}}).sql(dialect=dialect)


def source_of(table: exp.Table, registry: SourceRegistry, context: DataSource | None,
              ctes: set[str]) -> DataSource | None:
    """The data source a table reference reads, None for a CTE; strips the source part.

    Same rules as the gate (``sql/gate.py``): ``source.table``, ``source.schema.table``, or
    a bare name in the context data source. A source the caller may not query is not in
    ``registry`` and answers exactly as a missing one.
    """
    catalog, db = table.catalog, table.db
    if catalog:
        source = registry.require(catalog)
        table.set("catalog", None)
        return source
    if db and registry.get(db) is not None:
        source = registry.get(db)
        table.set("db", None)
        return source
    if not db and table.name.lower() in ctes:
        return None
    if db and context is None:
        raise SqlError(ErrorCode.UNKNOWN_SOURCE,
                       f"'{db}' in {table.sql()} is not a data source; configured data "
                       f"sources: {', '.join(registry.names()) or 'none'}")
    if context is not None:
        return context
    raise SqlError(ErrorCode.UNKNOWN_TABLE,
                   f"Table '{table.name}' names no data source: write <source>.{table.name} "
                   f"or set context.db to a data source "
                   f"({', '.join(registry.names()) or 'none configured'})")


def _local_names(statement: exp.Expression, given: Collection[str]) -> set[str]:
    """Bare table names that no source holds: the statement's CTEs and the given tables."""
    return {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)} | \
        {name.lower() for name in given}


def tables_of(statement: exp.Expression, registry: SourceRegistry,
              context: DataSource | None, given: Collection[str] = ()
              ) -> list[tuple[DataSource, exp.Table]]:
    """Each table the statement reads, once, with its source (as ``split`` resolves them;
    the tables are copies without their source qualifier). ``given``: names of tables the
    engine holds already (rows Quarry made), read from no source."""
    ctes = _local_names(statement, given)
    found: dict[tuple[str, str], tuple[DataSource, exp.Table]] = {}
    for node in statement.find_all(exp.Table):
        if not node.name:
            continue
        table = node.copy()
        table.set("alias", None)
        source = source_of(table, registry, context, ctes)
        if source is not None:
            found.setdefault((source.name, table.sql()), (source, table))
    return list(found.values())


def split(statement: exp.Expression, registry: SourceRegistry, context: DataSource | None,
          describe: Describe, given: dict[str, list[str]] | None = None,
          labels: dict[str, str] | None = None) -> Plan:
    """The legs and the engine statement of a parsed, read-only ``statement``; ``given``:
    tables the engine holds already (rows Quarry made: a knowledge base's search), by bare
    name, with their columns, and ``labels``: how to name them (by the same names)."""
    statement = statement.copy()
    names = _shown_names(statement)
    given = given or {}
    ctes = _local_names(statement, given)
    source_names = {name.lower() for name in registry.names()}
    legs: list[Leg] = []
    schema: dict[str, dict[str, str]] = {
        name: {column.lower(): "UNKNOWN" for column in columns}
        for name, columns in given.items()}
    described: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
    for table in list(statement.find_all(exp.Table)):
        if not table.name:
            raise SqlError(ErrorCode.UNSUPPORTED,
                           f"A table function ({table.sql()}) is not supported in a "
                           "statement over several data sources")
        written_alias = table.alias
        plain_name = table.name
        original = table.copy()
        original.set("alias", None)
        source = source_of(original, registry, context, ctes)
        if source is None:
            continue
        key = (source.name, original.sql())
        if key not in described:
            described[key] = describe(source, original)
        leg = Leg(len(legs), source, original, (written_alias or plain_name).lower(),
                  kinds={column.lower(): kind for column, kind in described[key]},
                  stored={"": {column.lower(): column for column, _ in described[key]}})
        legs.append(leg)
        schema[leg.name] = {column.lower(): "UNKNOWN" for column, _ in described[key]}
        table.replace(exp.Table(this=exp.to_identifier(leg.name),
                                alias=exp.TableAlias(this=exp.to_identifier(leg.alias))))
    # source.table.column and source.schema.table.column: the column's table is enough.
    for column in statement.find_all(exp.Column):
        for part in ("catalog", "db"):
            value = column.args.get(part)
            if value is not None and (part == "db" or value.name.lower() in source_names):
                column.set(part, None)
    _fold_quoted_columns(statement, schema)
    for alias in statement.find_all(exp.Alias):
        alias.meta[_WRITTEN] = True
    try:
        statement = qualify(statement, schema=schema, quote_identifiers=False,
                            identify=False, validate_qualify_columns=True)
    except OptimizeError as exc:
        raise _unresolved(exc, legs, schema) from None
    except SqlglotError as exc:
        raise SqlError(ErrorCode.SYNTAX, f"The statement cannot be read: {exc}") from None
    legs = _join_in_sources(statement, legs)
    _fill_legs(statement, legs)
    held = {name.lower(): Held(name, (labels or {}).get(name, name)) for name in given}
    links = find_links(statement, legs, held)
    try:
        engine_sql = _named_by_tables(statement).sql(dialect="duckdb")
    except SqlglotError as exc:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"The statement cannot be run over several data sources: {exc}"
                       ) from None
    for leg in legs:
        leg.sql, leg.shape = _texts(leg)
    return Plan(legs, engine_sql, names, links)


def _fold_quoted_columns(statement: exp.Expression, schema: dict[str, dict[str, str]]) -> None:
    """A quoted column name written in another case than the leg's column (``"movieId"``
    for a file's ``movieId``, which the schema holds as ``movieid``) names that column, as
    in DuckDB, whose identifiers ignore case, quoted or not; the qualifier would not find
    it. A quoted name that an output alias of the statement has is left as it is."""
    known = {column for columns in schema.values() for column in columns}
    aliases = {a.alias for a in statement.find_all(exp.Alias)}
    for column in statement.find_all(exp.Column):
        ident = column.this
        if isinstance(ident, exp.Identifier) and ident.quoted and ident.name not in aliases \
                and ident.name != ident.name.lower() and ident.name.lower() in known:
            ident.set("this", ident.name.lower())


def _named_by_tables(statement: exp.Expression) -> exp.Expression:
    """The qualified statement without the aliases the qualifier gave plain columns
    (``t.movieid AS movieid``): the engine then names such a column as its table does, in
    the table's case (a file's ``movieId``), where the alias would give the lower-cased name.
    An alias written in the statement stays."""
    statement = statement.copy()
    for alias in list(statement.find_all(exp.Alias)):
        column = alias.this
        if not alias.meta.get(_WRITTEN) and isinstance(column, exp.Column) and \
                isinstance(column.this, exp.Identifier) and \
                column.name.lower() == alias.alias.lower():
            alias.replace(column)
    return statement


def leg_sql(leg: Leg, extra: list[exp.Expression] | tuple = ()) -> str:
    """The leg's query in its source's dialect (with ``extra`` conditions: a dynamic
    filter)."""
    return _leg_select(leg, extra).sql(dialect=leg.source.sqlglot_dialect)


def source_column(leg: Leg, name: str) -> exp.Column:
    """Column ``name`` of the leg's engine table as its source knows it."""
    alias, column = leg.origin.get(name, (leg.alias, name))
    return exp.column(stored_name(leg, alias, column), table=alias, quoted=True)


def stored_name(leg: Leg, alias: str, name: str) -> str:
    """The source's own name of column ``name`` of the leg's table ``alias``."""
    return leg.stored.get(alias.lower() if leg.joined else "", {}).get(name.lower(), name)


def _with_stored_names(leg: Leg, condition: exp.Expression) -> exp.Expression:
    """``condition`` (a copy) with each column of the leg's tables by its source's name."""
    condition = condition.copy()
    for column in condition.find_all(exp.Column):
        if not column.table or not isinstance(column.this, exp.Identifier):
            continue
        name = stored_name(leg, column.table, column.name)
        if name != column.name:
            column.set("this", exp.to_identifier(name, quoted=True))
    return condition


def _texts(leg: Leg) -> tuple[str, str]:
    """The leg's query, and its shape: the same with every literal a ``?``, by which the
    sizes learnt of it are kept (a leg of another date is of about the same size). The
    literals are found by the dialect's tokenizer, in a tenth of the time it took to
    build the query again and write it with placeholders."""
    glot = leg.source.sqlglot_dialect
    sql = leg_sql(leg)
    parts, at = [], 0
    for token in Dialect.get_or_raise(glot).tokenize(sql):
        if token.token_type in _LITERAL_TOKENS:
            parts += [sql[at:token.start], "?"]
            at = token.end + 1
    parts.append(sql[at:])
    return sql, f"{leg.source.name}:{''.join(parts)}"


_LITERAL_TOKENS = frozenset(
    getattr(TokenType, name) for name in (
        "STRING", "NUMBER", "BYTE_STRING", "HEX_STRING", "BIT_STRING", "NATIONAL_STRING",
        "RAW_STRING", "HEREDOC_STRING", "UNICODE_STRING") if hasattr(TokenType, name))


def _leg_select(leg: Leg, extra: list[exp.Expression] | tuple) -> exp.Select:
    tables = leg.joined or [(leg.table, leg.alias)]
    columns: list[exp.Expression] = []
    for name in leg.columns:
        value = source_column(leg, name)
        columns.append(value if value.name == name else exp.alias_(value, name, quoted=True))
    select = exp.select(*(columns or [exp.alias_(exp.Literal.number(1), "quarry_one")]))
    for i, (table, alias) in enumerate(tables):
        table = table.copy()
        table.set("alias", exp.TableAlias(this=exp.to_identifier(alias, quoted=True)))
        # copy=False: the select is this function's own (sqlglot's builders copy the whole
        # tree at each call otherwise, most of a leg's writing time).
        select = select.from_(table, copy=False) if i == 0 else \
            select.join(table, join_type="CROSS", copy=False)
    for condition in [*leg.filters, *extra]:
        select = select.where(_with_stored_names(leg, condition), copy=False)
    if leg.limit is not None:
        select = select.limit(leg.limit, copy=False)
    return select


def _shown_names(statement: exp.Expression) -> list[str | None]:
    """Per output column of the statement as written, the text to show for an expression
    with no alias (the qualifier would call it ``_col_0``); None: keep the engine's name."""
    select = statement
    while isinstance(select, exp.SetOperation):
        select = select.this
    if not isinstance(select, exp.Select) or any(
            isinstance(e, exp.Star) or isinstance(e, exp.Column) and e.is_star
            for e in select.expressions):
        return []
    return [None if isinstance(e, exp.Alias | exp.Column) else e.sql()
            for e in select.expressions]


def shown_names(plan: Plan, engine_names: list[str]) -> list[str]:
    if len(plan.names) != len(engine_names):
        return engine_names
    return [shown if shown is not None and _GENERATED_NAME.fullmatch(name) else name
            for name, shown in zip(engine_names, plan.names, strict=True)]


def _unresolved(exc: OptimizeError, legs: list[Leg], schema: dict[str, dict[str, str]]
                ) -> SqlError:
    tables = "; ".join(f"{leg.alias} is {leg.label()} ({', '.join(schema[leg.name])})"
                       for leg in legs)
    message = str(exc).replace(LEG_PREFIX, "table ") if LEG_PREFIX in str(exc) else str(exc)
    return SqlError(ErrorCode.QUERY_FAILED, f"{message} — tables: {tables}")


# --- what each leg needs ---------------------------------------------------------------------

def _fill_legs(statement: exp.Expression, legs: list[Leg]) -> None:
    wanted: dict[str, set[str]] = {}
    simple: list[Leg] = []
    for node in list(statement.find_all(exp.Table)):
        if not node.name.startswith(LEG_PREFIX):
            continue
        leg = next((lg for lg in legs if lg.name == node.name), None)
        if leg is None:
            continue
        if leg.joined:  # its columns and filters were decided when its tables were joined
            leg.columns = sorted(leg.origin)
            continue
        leg.alias = node.alias_or_name  # the qualifier keeps or canonicalises it
        simple.append(leg)
        _push_down(node, leg)
    # After the pushes: a column only a settled condition read is not sent.
    for column in statement.find_all(exp.Column):
        if column.table:
            wanted.setdefault(column.table.lower(), set()).add(column.name.lower())
    for leg in simple:
        leg.columns = sorted(wanted.get(leg.alias.lower(), ()))


def _push_down(table: exp.Table, leg: Leg) -> None:
    holder = table.parent
    select = holder.parent if isinstance(holder, exp.From | exp.Join) else None
    if not isinstance(select, exp.Select):
        return
    joins = select.args.get("joins") or []
    nullable = _nullable(select, joins)
    own = leg.alias.lower()
    where = select.args.get("where")
    pushed_all = True
    if where is not None:
        kept = []
        for conjunct in _conjuncts(where.this):
            if own not in nullable and _pushable(conjunct, own, leg.source):
                leg.filters.append(conjunct)
                if _settled(conjunct, leg):
                    continue
            else:
                pushed_all = False
            kept.append(conjunct)
        if len(kept) < len(_conjuncts(where.this)):
            select.set("where", exp.Where(this=exp.and_(*kept, copy=False)) if kept else None)
    if isinstance(holder, exp.Join) and holder.args.get("on") is not None:
        # ON conditions filter only this table's rows at its own inner or left join,
        # whatever joins come after.
        if (holder.side or "").upper() in ("", "LEFT"):
            for conjunct in _conjuncts(holder.args["on"]):
                if _pushable(conjunct, own, leg.source):
                    leg.filters.append(conjunct)
    limit = select.args.get("limit")
    if (pushed_all and not joins and isinstance(holder, exp.From) and limit is not None
            and not select.args.get("group") and not select.args.get("having")
            and not select.args.get("order") and not select.args.get("distinct")
            and not any(select.find_all(exp.AggFunc, exp.Window))):
        count = _literal_int(limit.expression)
        offset = select.args.get("offset")
        skip = _literal_int(offset.expression) if offset is not None else 0
        if count is not None and skip is not None:
            leg.limit = count + skip


def _join_in_sources(statement: exp.Expression, legs: list[Leg]) -> list[Leg]:
    """Merge the legs of one source that a SELECT joins (inner joins only) into one leg
    that the source joins itself; the legs after merging."""
    aliases = Counter(t.alias_or_name.lower() for t in statement.find_all(exp.Table))
    merged = True
    while merged:
        merged = False
        for select in statement.find_all(exp.Select):
            group = _same_source_group(select, legs, aliases)
            if group is not None:
                legs = _merge(statement, select, legs, *group)
                merged = True
                break
    return legs


def _same_source_group(select: exp.Select, legs: list[Leg], aliases: Counter
                       ) -> tuple[list[Leg], list[exp.Expression]] | None:
    """Legs of one source joined in ``select`` and connected by conditions the source can
    evaluate, with those conditions; None when there are none."""
    joins = select.args.get("joins") or []
    start = select.args.get("from_")
    if not joins or start is None:
        return None
    for join in joins:
        # Outer joins keep their legs apart: where their conditions apply matters.
        if join.args.get("using") or (join.side or "") or \
                (join.kind or "").upper() not in ("", "INNER", "CROSS"):
            return None
    by_name = {leg.name: leg for leg in legs}
    groups: dict[str, list[Leg]] = {}
    for node in [start.this] + [join.this for join in joins]:
        leg = by_name.get(node.name) if isinstance(node, exp.Table) else None
        # An alias used twice in the statement could not be told apart when rewritten. Files
        # are joined by the engine: their source runs no SQL of its own.
        if leg is not None and not leg.joined and aliases[leg.alias.lower()] == 1 \
                and not leg.source.engine_only:
            groups.setdefault(leg.source.name, []).append(leg)
    conditions = _select_conditions(select)
    conditions += _implied_equalities(conditions)
    for members in groups.values():
        if len(members) < 2:
            continue
        names = {leg.alias.lower() for leg in members}
        pushed = [c for c in conditions if _pushable(c, names, members[0].source)]
        connected = _connected(names, pushed)
        if len(connected) < 2:
            continue
        return [leg for leg in members if leg.alias.lower() in connected], \
            [c for c in pushed if _aliases(c) <= connected]
    return None


def _select_conditions(select: exp.Select) -> list[exp.Expression]:
    conditions = []
    where = select.args.get("where")
    if where is not None:
        conditions += _conjuncts(where.this)
    for join in select.args.get("joins") or []:
        if join.args.get("on") is not None:
            conditions += _conjuncts(join.args["on"])
    return conditions


def _implied_equalities(conditions: list[exp.Expression]) -> list[exp.Expression]:
    """``a = c`` for every ``a = b AND b = c`` the conditions hold (inner joins: each holds
    for every row of the answer). TPC-H Q5 joins customer to supplier and supplier to
    nation; customer and nation, both in one source, are then joined there."""
    classes: list[set[str]] = []
    columns: dict[str, exp.Column] = {}
    for condition in conditions:
        if isinstance(condition, exp.EQ) and isinstance(condition.this, exp.Column) \
                and isinstance(condition.expression, exp.Column):
            pair = set()
            for column in (condition.this, condition.expression):
                key = _column_key(column)
                columns[key] = column
                pair.add(key)
            touching = [c for c in classes if c & pair]
            merged = pair.union(*touching)
            classes = [c for c in classes if not c & pair] + [merged]
    written = {frozenset((_column_key(c.this), _column_key(c.expression))) for c in conditions
               if isinstance(c, exp.EQ) and isinstance(c.this, exp.Column)
               and isinstance(c.expression, exp.Column)}
    implied = []
    for members in classes:
        for left, right in itertools.combinations(sorted(members), 2):
            if frozenset((left, right)) not in written:
                implied.append(exp.EQ(this=columns[left].copy(),
                                      expression=columns[right].copy()))
    return implied


def _column_key(column: exp.Column) -> tuple[tuple[str, bool], ...]:
    """A qualified column as its parts (name, quoted), its table's first: what tells two
    columns apart, as their text would, without writing it."""
    return tuple((part.name, bool(part.args.get("quoted"))) for part in column.parts)


def _aliases(condition: exp.Expression) -> set[str]:
    return {(c.table or "").lower() for c in condition.find_all(exp.Column)}


def _connected(names: set[str], conditions: list[exp.Expression]) -> set[str]:
    """The largest set of ``names`` linked by conditions between them (a join graph's
    component): tables without a condition between them are not joined at the source,
    where they would make a cross product."""
    links = [_aliases(c) for c in conditions if len(_aliases(c)) > 1]
    best: set[str] = set()
    for first in sorted(names):
        found = component(first, links)
        if len(found) > len(best):
            best = found
    return best


def component(first: str, links: list[set[str]]) -> set[str]:
    """``first`` and every name that ``links`` (sets of names linked together) reach from
    it, link after link."""
    found = {first}
    grown = True
    while grown:
        grown = False
        for link in links:
            if link & found and not link <= found:
                found |= link
                grown = True
    return found


def _merge(statement: exp.Expression, select: exp.Select, legs: list[Leg],
           members: list[Leg], pushed: list[exp.Expression]) -> list[Leg]:
    index = max(leg.index for leg in legs) + 1
    first = members[0]
    merged = Leg(index, first.source, first.table, first.alias,
                 joined=[(leg.table, leg.alias) for leg in members],
                 filters=[c.copy() for c in pushed])
    merged.alias = merged.name
    merged.stored = {leg.alias.lower(): leg.stored.get("", {}) for leg in members}
    names = {leg.name for leg in members}
    kinds = {leg.alias.lower(): leg.kinds for leg in members}
    # Inner joins only: every ON condition may as well be a WHERE condition, and the
    # engine keeps them (the source's answer is only ever a superset of the rows), but
    # for an equality of two integer columns of the leg's tables: exact in the source,
    # it holds in every row the leg sends, and the leg need not send the two columns
    # for it (TPC-H Q5: n_regionkey = r_regionkey, two of the MariaDB leg's 7 columns).
    conditions = [c for c in _select_conditions(select)
                  if not _exact_in_source(c, kinds, first.source)]
    items = [select.args["from_"].this] + [join.this for join in select.args["joins"]]
    kept: list[exp.Expression] = []
    for item in items:
        if isinstance(item, exp.Table) and item.name in names:
            if item.name == first.name:
                kept.append(exp.Table(this=exp.to_identifier(merged.name),
                                      alias=exp.TableAlias(
                                          this=exp.to_identifier(merged.name))))
            continue
        kept.append(item)
    select.set("from_", exp.From(this=kept[0]))
    select.set("joins", [exp.Join(this=item, kind="CROSS") for item in kept[1:]])
    select.set("where", exp.Where(this=exp.and_(*conditions)) if conditions else None)
    owners = {leg.alias.lower(): leg.alias for leg in members}
    for column in statement.find_all(exp.Column):
        alias = owners.get((column.table or "").lower())
        if alias is None:
            continue
        name = f"{alias}__{column.name}".lower()
        merged.origin[name] = (alias, column.name)
        merged.kinds[name] = kinds[alias.lower()].get(column.name.lower())
        column.set("this", exp.to_identifier(name))
        column.set("table", exp.to_identifier(merged.name))
    return [leg for leg in legs if leg.name not in names] + [merged]


# Sources whose integer columns compare exactly, as the engine compares them.
_EXACT_INTEGERS = ("postgresql", "mysql")


def _exact_in_source(condition: exp.Expression, kinds: dict[str, dict[str, str | None]],
                     source: DataSource) -> bool:
    """Whether ``condition`` is ``a.x = b.y`` of two integer columns of the tables in
    ``kinds`` (by alias) that ``source`` compares as the engine does."""
    if source.dialect not in _EXACT_INTEGERS or not isinstance(condition, exp.EQ):
        return False
    return all(isinstance(side, exp.Column)
               and kinds.get((side.table or "").lower(), {}).get(side.name.lower()) == "int"
               for side in (condition.this, condition.expression))


def _literal_int(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


# Kinds of column (``Leg.kinds``) whose comparison with a literal means exactly the same
# in PostgreSQL, MariaDB/MySQL and the engine, and the literals that compare so with each.
_EXACT_KINDS = ("int", "decimal", "date")
_PLAIN_NUMBER = re.compile(r"\d+(\.\d*)?|\.\d+")
_ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


def _settled(condition: exp.Expression, leg: Leg) -> bool:
    """Whether ``condition``, pushed to ``leg``, keeps in its source exactly the rows the
    engine would keep: a comparison (=, <>, <, <=, >, >=, BETWEEN) of an integer, decimal
    or date column of a PostgreSQL or MariaDB/MySQL leg with plain literals of its kind
    (a number without exponent; a date written 'YYYY-MM-DD'). Such a condition is left out
    of the engine's statement, and a column it alone reads is not sent: the 2 %-selective
    join's orders leg no longer sends the 21 204 order dates its filter kept. Text (the
    source's collation), floats, timestamps (precision, time zone) and SQLite (its columns
    may hold any type) stay checked by the engine too."""
    if leg.source.dialect not in ("postgresql", "mysql"):
        return False
    if isinstance(condition, exp.Between):
        column, literals = condition.this, [condition.args.get("low"),
                                            condition.args.get("high")]
    elif isinstance(condition, exp.EQ | exp.NEQ | exp.GT | exp.GTE | exp.LT | exp.LTE):
        column, literals = condition.this, [condition.expression]
        if not isinstance(column, exp.Column):
            column, literals = condition.expression, [condition.this]
    else:
        return False
    if not isinstance(column, exp.Column):
        return False
    kind = leg.kinds.get(column.name.lower())
    return kind in _EXACT_KINDS and all(_exact_literal(node, kind) for node in literals)


def _is_date(text: str) -> bool:
    """A valid calendar date ('2023-02-30' is none: each side would read it its own way)."""
    try:
        datetime.date.fromisoformat(text)
    except ValueError:
        return False
    return True


def _exact_literal(node: exp.Expression | None, kind: str) -> bool:
    if isinstance(node, exp.Neg) and kind != "date":
        node = node.this
    if kind == "date":
        if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.DATE:
            node = node.this
        return isinstance(node, exp.Literal) and node.is_string and \
            _ISO_DATE.fullmatch(node.this) is not None and _is_date(node.this)
    return isinstance(node, exp.Literal) and not node.is_string and \
        _PLAIN_NUMBER.fullmatch(node.this) is not None


def _nullable(select: exp.Select, joins: list[exp.Join]) -> set[str]:
    """Aliases whose rows an outer join of ``select`` may turn into NULLs."""
    seen = [_alias(select.args["from_"].this)] if select.args.get("from_") else []
    nullable: set[str] = set()
    for join in joins:
        alias = _alias(join.this)
        side = (join.side or "").upper()
        if side == "LEFT":
            nullable.add(alias)
        elif side == "RIGHT":
            nullable.update(seen)
        elif side == "FULL":
            nullable.update(seen)
            nullable.add(alias)
        seen.append(alias)
    return nullable


def _alias(node: exp.Expression) -> str:
    return (node.alias_or_name or "").lower()


def _conjuncts(condition: exp.Expression) -> list[exp.Expression]:
    if isinstance(condition, exp.Paren):
        return _conjuncts(condition.this)
    if isinstance(condition, exp.And):
        return _conjuncts(condition.this) + _conjuncts(condition.expression)
    return [condition]


# Nodes a pushed filter may hold: comparisons of columns and literals. No function: its
# meaning differs between databases (and each source's allow-list would have its say).
_SIMPLE = (exp.Column, exp.Identifier, exp.Literal, exp.Null, exp.Boolean, exp.EQ, exp.NEQ,
           exp.GT, exp.GTE, exp.LT, exp.LTE, exp.Between, exp.In, exp.Is, exp.Not, exp.And,
           exp.Or, exp.Paren, exp.Like, exp.Neg, exp.Tuple)


def _pushable(condition: exp.Expression, alias: str | set[str], source: DataSource) -> bool:
    """Whether ``condition`` reads only the columns of ``alias`` (or of these aliases) and
    means the same in the source (or a little less strictly)."""
    allowed = {alias} if isinstance(alias, str) else alias
    columns = list(condition.find_all(exp.Column))
    if not columns or any((c.table or "").lower() not in allowed for c in columns):
        return False
    for node in condition.walk():
        if isinstance(node, exp.Cast) and source.dialect != "sqlite" \
                and isinstance(node.this, exp.Literal) \
                and node.to.this in (exp.DataType.Type.DATE, exp.DataType.Type.TIMESTAMP):
            continue  # DATE '2024-01-01'; SQLite has no date type to cast to
        if isinstance(node, exp.DataType) and isinstance(node.parent, exp.Cast):
            continue
        if isinstance(node, exp.In) and node.args.get("query") is not None:
            return False
        if not isinstance(node, _SIMPLE):
            return False
    return True


# --- dynamic filters: which leg's rows may be cut by another leg's keys ----------------------

# Kinds of sources whose legs take a dynamic filter: those that declare their columns' types
# (SQLite: its INTEGER and TEXT columns). An uploaded file is scanned in place by the engine,
# which filters its row groups by the join's keys itself.
_FILTERABLE = ("postgresql", "mysql", "sqlite")


def find_links(statement: exp.Expression, legs: list[Leg],
               held: dict[str, Held] | None = None) -> list[Link]:
    """The equalities between columns of two legs (or of a table the engine holds, by its
    lower-case name in ``held``, and a leg) that let one leg be cut to the other's keys
    without changing the answer.

    A leg can be cut to the keys of another when every row of the answer that uses one of
    its rows has the two columns equal (NULL equals nothing, so neither side's NULLs
    matter), which holds for:

    - a WHERE conjunct of the SELECT both legs are joined in (rows that fail it are
      dropped, whatever the joins before made of them), and the equalities such conjuncts
      imply (a = b AND b = c: a = c);
    - an ON conjunct of an inner join, and of the SELECT's other joins too when all of
      them are inner (they then filter the whole product);
    - an ON conjunct of an outer join, only on its NULL side: ``A LEFT JOIN B ON a.k =
      b.k`` may cut B to A's keys (a B row no A row matches is never joined), never A,
      whose unmatched rows are kept; RIGHT the other way round; FULL neither.
    """
    by_name = {leg.name: leg for leg in legs}
    held = held or {}
    found: dict[tuple[str, str, str, str], Link] = {}

    def add(source: Leg | Held | _Through, column: exp.Column, target: Leg | Held | _Through,
            target_column: exp.Column) -> None:
        name, source_name = target_column.name.lower(), column.name.lower()
        if not isinstance(target, Leg) or target.source.dialect not in _FILTERABLE or \
                target.kinds.get(name) is None:
            return
        if isinstance(source, _Through):  # a subquery over held rows: its column's origin
            source_name, cast = source.columns.get(source_name, (None, False))
            if source_name is None or (cast and target.kinds.get(name) != "int"):
                return
            source = source.held
        key = (source.name, source_name, target.name, name)
        found.setdefault(key, Link(source, source_name, target, name))

    for select in statement.find_all(exp.Select):
        start = select.args.get("from_")
        if start is None:
            continue
        joins = select.args.get("joins") or []
        here: dict[str, Leg | Held | _Through] = {}
        for item in [start.this] + [join.this for join in joins]:
            if isinstance(item, exp.Table) and item.name in by_name:
                here[_alias(item)] = by_name[item.name]
            elif isinstance(item, exp.Table) and item.name.lower() in held:
                here[_alias(item)] = held[item.name.lower()]
            elif (through := _through(item, held)) is not None:
                here[_alias(item)] = through
        where = select.args.get("where")
        common = _conjuncts(where.this) if where is not None else []
        # column IN (SELECT … FROM <held rows>): the column holds only their values.
        for conjunct in common:
            if isinstance(conjunct, exp.In) and isinstance(conjunct.this, exp.Column) and \
                    (through := _through(conjunct.args.get("query"), held)) is not None \
                    and len(through.order) == 1:
                target = here.get(_table(conjunct.this))
                if target is not None:
                    add(through, exp.column(through.order[0]), target, conjunct.this)
        if len(here) < 2:
            continue
        outer = any(_join_kind(join) != "INNER" for join in joins)
        if not outer:
            for join in joins:
                if join.args.get("on") is not None:
                    common += _conjuncts(join.args["on"])
        common = [c for c in common if _pair(c, here)]
        common += _implied_equalities(common)
        pairs = [(a, b) for c in common if (pair := _pair(c, here)) for a, b in
                 (pair, pair[::-1])]
        if outer:
            for join in joins:
                kind, on = _join_kind(join), join.args.get("on")
                if on is None or kind not in ("INNER", "LEFT", "RIGHT"):
                    continue
                mine = _alias(join.this)
                for conjunct in _conjuncts(on):
                    pair = _pair(conjunct, here)
                    if pair is None:
                        continue
                    for a, b in (pair, pair[::-1]):  # b is cut to a's keys
                        if kind == "INNER" or (kind == "LEFT" and _table(b) == mine) or \
                                (kind == "RIGHT" and _table(a) == mine):
                            pairs.append((a, b))
        for a, b in pairs:
            add(here[_table(a)], a, here[_table(b)], b)
    return list(found.values())


@dataclass
class _Through:
    """A subquery that selects from held rows alone (``(SELECT id, relevance FROM <hits>
    WHERE … LIMIT 5) AS k``, or the list of ``x IN (SELECT id FROM <hits> …)``): each of
    its columns that is a held column as it is holds a subset of that column's values
    (NULL aside), which may cut a leg as the held rows themselves do."""

    held: Held
    columns: dict[str, tuple[str, bool]]   # output name -> (held column, cast to integer)
    order: list[str]                       # the output names, in the select's order


# Integer types a subquery may cast a held column to (the keys go to an integer column
# as DuckDB casts text to an integer, which is what such a CAST does).
_INTEGER_TYPES = {exp.DataType.Type.TINYINT, exp.DataType.Type.SMALLINT,
                  exp.DataType.Type.INT, exp.DataType.Type.BIGINT}


def _through(node: exp.Expression | None, held: dict[str, Held]) -> _Through | None:
    """``node`` as a _Through when it is a subquery whose one table is held rows, with no
    join, set operation or CTE of its own; else None."""
    while isinstance(node, exp.Subquery | exp.Paren):
        node = node.this
    if not isinstance(node, exp.Select) or node.args.get("joins") or node.args.get("with_"):
        return None
    start = node.args.get("from_")
    table = start.this if start is not None else None
    if not isinstance(table, exp.Table) or table.name.lower() not in held:
        return None
    alias = _alias(table)
    columns, order = {}, []
    for projection in node.expressions:
        value, name = projection.unalias(), projection.alias_or_name.lower()
        order.append(name)
        cast = isinstance(value, exp.Cast) and value.to.this in _INTEGER_TYPES
        if cast:
            value = value.this
        if isinstance(value, exp.Column) and _table(value) in ("", alias):
            columns.setdefault(name, (value.name.lower(), cast))
    return _Through(held[table.name.lower()], columns, order)


def _join_kind(join: exp.Join) -> str:
    """INNER (also a comma or CROSS join), LEFT, RIGHT, FULL, or OTHER (SEMI, ANTI,
    NATURAL, USING: nothing is read from those)."""
    side = (join.side or "").upper()
    kind = (join.kind or "").upper()
    if join.args.get("using") or join.args.get("method") or kind in ("SEMI", "ANTI"):
        return "OTHER"
    return side or "INNER"


def _table(column: exp.Column) -> str:
    return (column.table or "").lower()


def _pair(condition: exp.Expression, here: dict[str, Leg | Held]
          ) -> tuple[exp.Column, exp.Column] | None:
    """The two columns of ``a.x = b.y`` when they belong to two legs of ``here``."""
    if not isinstance(condition, exp.EQ):
        return None
    left, right = condition.this, condition.expression
    if not isinstance(left, exp.Column) or not isinstance(right, exp.Column):
        return None
    first, second = here.get(_table(left)), here.get(_table(right))
    if first is None or second is None or first is second:
        return None
    return left, right
