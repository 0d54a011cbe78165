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

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from sqlglot import exp
from sqlglot.errors import OptimizeError, SqlglotError
from sqlglot.optimizer.qualify import qualify

from ..sql.errors import ErrorCode, SqlError
from ..sql.gate import check_read_only, check_row_counts, parse_single
from ..sql.sources import DataSource, SourceRegistry

LEG_PREFIX = "leg_"
_GENERATED_NAME = re.compile(r"_col_\d+")


@dataclass
class Leg:
    """One table reference, read from its data source."""

    index: int
    source: DataSource
    table: exp.Table                 # as the source knows it (no source qualifier)
    alias: str                       # the alias the engine statement uses for its rows
    columns: list[str] = field(default_factory=list)
    filters: list[exp.Expression] = field(default_factory=list)
    limit: int | None = None
    sql: str = ""                    # in the source's dialect
    rows: int = 0                    # delivered so far

    @property
    def name(self) -> str:
        return f"{LEG_PREFIX}{self.index}"

    def label(self) -> str:
        return f"{self.source.name}.{self.table.sql(dialect=self.source.sqlglot_dialect)}"


@dataclass
class Plan:
    legs: list[Leg]
    engine_sql: str                  # DuckDB's dialect, over tables leg_0 …
    names: list[str | None]          # output names to show instead of DuckDB's (None: its own)


# Describes a table: its column names, read from the source (raises SqlError).
Describe = Callable[[DataSource, exp.Table], list[str]]


def parse(query: str, registry: SourceRegistry) -> exp.Expression:
    """The statement, parsed and checked read-only before anything reaches a source."""
    try:
        statement = parse_single(query, None)
    except SqlError as exc:
        if exc.code != ErrorCode.SYNTAX:
            raise
        statement = None
        for glot in registry.dialects():
            try:
                statement = parse_single(query, glot)
                break
            except SqlError:
                continue
        if statement is None:
            raise
    check_read_only(statement, None)
    check_row_counts(statement)
    if statement.find(exp.Placeholder) is not None:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       "Parameters (:name) are not supported yet in a statement over several "
                       "data sources; write the values in the statement")
    return statement


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


def split(statement: exp.Expression, registry: SourceRegistry, context: DataSource | None,
          describe: Describe) -> Plan:
    """The legs and the engine statement of a parsed, read-only ``statement``."""
    statement = statement.copy()
    names = _shown_names(statement)
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    source_names = {name.lower() for name in registry.names()}
    legs: list[Leg] = []
    schema: dict[str, dict[str, str]] = {}
    described: dict[tuple[str, str], list[str]] = {}
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
        leg = Leg(len(legs), source, original, (written_alias or plain_name).lower())
        legs.append(leg)
        schema[leg.name] = {column.lower(): "UNKNOWN" for column in described[key]}
        table.replace(exp.Table(this=exp.to_identifier(leg.name),
                                alias=exp.TableAlias(this=exp.to_identifier(leg.alias))))
    # source.table.column and source.schema.table.column: the column's table is enough.
    for column in statement.find_all(exp.Column):
        for part in ("catalog", "db"):
            value = column.args.get(part)
            if value is not None and (part == "db" or value.name.lower() in source_names):
                column.set(part, None)
    try:
        statement = qualify(statement, schema=schema, quote_identifiers=False,
                            identify=False, validate_qualify_columns=True)
    except OptimizeError as exc:
        raise _unresolved(exc, legs, schema) from None
    except SqlglotError as exc:
        raise SqlError(ErrorCode.SYNTAX, f"The statement cannot be read: {exc}") from None
    _fill_legs(statement, legs)
    try:
        engine_sql = statement.sql(dialect="duckdb")
    except SqlglotError as exc:
        raise SqlError(ErrorCode.UNSUPPORTED,
                       f"The statement cannot be run over several data sources: {exc}"
                       ) from None
    for leg in legs:
        leg.sql = leg_sql(leg)
    return Plan(legs, engine_sql, names)


def leg_sql(leg: Leg) -> str:
    """The leg's query in its source's dialect."""
    table = leg.table.copy()
    table.set("alias", exp.TableAlias(this=exp.to_identifier(leg.alias, quoted=True)))
    columns = [exp.column(c, table=leg.alias, quoted=True) for c in leg.columns] \
        or [exp.alias_(exp.Literal.number(1), "quarry_one")]
    select = exp.select(*columns).from_(table)
    for condition in leg.filters:
        select = select.where(condition.copy(), copy=False)
    if leg.limit is not None:
        select = select.limit(leg.limit)
    return select.sql(dialect=leg.source.sqlglot_dialect)


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
    by_alias: dict[str, list[Leg]] = {}
    for leg in legs:
        by_alias.setdefault(leg.alias, []).append(leg)
    wanted: dict[str, set[str]] = {}
    for column in statement.find_all(exp.Column):
        if column.table:
            wanted.setdefault(column.table.lower(), set()).add(column.name.lower())
    for node in statement.find_all(exp.Table):
        if not node.name.startswith(LEG_PREFIX):
            continue
        leg = next((lg for lg in legs if lg.name == node.name), None)
        if leg is None:
            continue
        leg.alias = node.alias_or_name  # the qualifier keeps or canonicalises it
        leg.columns = sorted(wanted.get(leg.alias.lower(), ()))
        _push_down(node, leg)


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
        for conjunct in _conjuncts(where.this):
            if own not in nullable and _pushable(conjunct, own, leg.source):
                leg.filters.append(conjunct)
            else:
                pushed_all = False
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


def _literal_int(node: exp.Expression | None) -> int | None:
    if isinstance(node, exp.Literal) and not node.is_string and node.this.isdigit():
        return int(node.this)
    return None


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


def _pushable(condition: exp.Expression, alias: str, source: DataSource) -> bool:
    columns = list(condition.find_all(exp.Column))
    if not columns or any((c.table or "").lower() != alias for c in columns):
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
