"""The parser gate: exactly one statement, of a read kind, naming one data source.

This is the first of the read-only layers (the connection itself is the second, see
``execute.py``). What runs on the data source is the text sqlglot generates from the tree it
checked, never the caller's text: a statement cannot smuggle a second one past the gate
through a parser difference (comments, quoting games, dollar quotes).
"""

from __future__ import annotations

import re
import secrets
from dataclasses import dataclass
from typing import Any

from sqlglot import exp

from .errors import ErrorCode, SqlError
from .functions import FunctionPolicy
from .sources import DataSource, SourceRegistry
from .syntax import parse_sqlglot

_READ_KINDS = (exp.Select, exp.SetOperation, exp.Values, exp.Subquery)

# Nodes that write, change session or server state, or take locks, anywhere in the tree.
_FORBIDDEN_NODES: tuple[tuple[type[exp.Expression], str], ...] = (
    (exp.Into, "SELECT … INTO creates or writes a table, file or variable"),
    (exp.Lock, "FOR UPDATE / FOR SHARE locks rows"),
    (exp.DML, "it changes data"),
    (exp.Insert, "it changes data"),
    (exp.Update, "it changes data"),
    (exp.Delete, "it changes data"),
    (exp.Merge, "it changes data"),
    (exp.DDL, "it changes the schema"),
    (exp.Create, "it changes the schema"),
    (exp.Drop, "it changes the schema"),
    (exp.Alter, "it changes the schema"),
    (exp.TruncateTable, "it changes data"),
    (exp.Copy, "COPY reads or writes files"),
    (exp.LoadData, "it loads files"),
    (exp.Command, "it is not a query"),
    (exp.Set, "it changes settings"),
    (exp.Pragma, "it changes settings"),
    (exp.Attach, "it attaches databases"),
    (exp.Detach, "it detaches databases"),
    (exp.Transaction, "transaction control is the service's"),
    (exp.Commit, "transaction control is the service's"),
    (exp.Rollback, "transaction control is the service's"),
    (exp.Grant, "it changes privileges"),
    (exp.Revoke, "it changes privileges"),
    (exp.Use, "it changes the session"),
    (exp.Analyze, "it writes statistics"),
    (exp.Kill, "it stops other sessions"),
)

@dataclass(frozen=True)
class GatedStatement:
    """A statement that passed the gate, rewritten for its data source."""

    source: DataSource | None     # None: no table at all (SELECT 1)
    sql: str                      # in the source's dialect, placeholders in driver style
    param_names: tuple[str, ...]
    count_params: tuple[str, ...] = ()  # :names given as LIMIT/OFFSET (64-bit integers)


def parse_single(query: str, dialect: str | None) -> exp.Expression:
    """Exactly one statement, parsed; SYNTAX (in SQL words, ``syntax.py``) or
    MULTIPLE_STATEMENTS otherwise."""
    if not query or not query.strip():
        raise SqlError(ErrorCode.SYNTAX, "The SQL statement is empty")
    statements = parse_sqlglot(query, dialect)
    if not statements:
        raise SqlError(ErrorCode.SYNTAX, "The SQL statement is empty")
    if len(statements) > 1:
        raise SqlError(ErrorCode.MULTIPLE_STATEMENTS,
                       f"Only one SQL statement is allowed per request; got {len(statements)}")
    return statements[0]


def check_functions(statement: exp.Expression, source: DataSource) -> None:
    """FORBIDDEN_FUNCTION unless every function the statement calls is on the source's
    allow-list (see ``functions/``): a function nobody thought of is refused by default."""
    check_calls(statement, source.functions)


def check_calls(statement: exp.Expression, policy: FunctionPolicy) -> None:
    """FORBIDDEN_FUNCTION unless ``policy`` allows every function the statement calls."""
    refusal = policy.statement_refusal(statement)
    if refusal is not None:
        raise SqlError(ErrorCode.FORBIDDEN_FUNCTION, refusal)
    for node in statement.walk():
        refusal = policy.refusal(node)
        if refusal is not None:
            raise SqlError(ErrorCode.FORBIDDEN_FUNCTION, refusal)


def check_read_only(statement: exp.Expression, dialect: str | None) -> None:
    """READ_ONLY / FORBIDDEN_FUNCTION unless the statement only reads."""
    if not isinstance(statement, _READ_KINDS):
        if isinstance(statement, exp.Command):
            kind = str(statement.this).split()[0]
        elif isinstance(statement, exp.Alias | exp.Condition | exp.Func):
            # A word sqlglot does not know as a statement (LISTEN x, DISCARD ALL) reads as
            # a column and its alias: name the word, not the parser's node.
            kind = re.match(r"\W*(\w*)", statement.sql()).group(1) or statement.key
        else:
            kind = statement.key
        raise SqlError(ErrorCode.READ_ONLY,
                       f"Only SELECT statements run on data sources (read-only); "
                       f"{kind.upper()} is refused")
    for node in statement.walk():
        for kind, why in _FORBIDDEN_NODES:
            if isinstance(node, kind):
                raise SqlError(ErrorCode.READ_ONLY,
                               f"The statement is refused (read-only): {why}")
        if isinstance(node, exp.PropertyEQ) and dialect == "mysql":
            raise SqlError(ErrorCode.READ_ONLY,
                           "The statement is refused (read-only): it assigns a variable")


# Row counts are 64-bit integers in every database; beyond, each answers in its own words
# (SQLite "datatype mismatch", PostgreSQL "bigint out of range", MariaDB a syntax error).
MAX_ROW_COUNT = 2**63 - 1


def _row_counts(statement: exp.Expression) -> list[tuple[str, exp.Expression]]:
    """(clause, value) of every LIMIT, OFFSET and FETCH count in the statement."""
    found = []
    for node in statement.find_all(exp.Limit, exp.Offset, exp.Fetch):
        for part in ("expression", "offset", "count"):
            value = node.args.get(part)
            if isinstance(value, exp.Expression):
                clause = "OFFSET" if part == "offset" or isinstance(node, exp.Offset) \
                    else node.key.upper()
                found.append((clause, value))
    return found


def check_row_counts(statement: exp.Expression) -> tuple[str, ...]:
    """OUT_OF_RANGE for a LIMIT/OFFSET number beyond 64 bits; the :names used as counts."""
    names = []
    for clause, value in _row_counts(statement):
        number = value.this if isinstance(value, exp.Neg) else value
        if isinstance(number, exp.Placeholder) and number.name:
            names.append(number.name)
        if isinstance(number, exp.Literal) and not number.is_string:
            if _too_large(number.this):
                raise SqlError(ErrorCode.OUT_OF_RANGE,
                               f"The number {value.sql()} in {clause} is too large: a row "
                               f"count is at most {MAX_ROW_COUNT}")
    return tuple(names)


def _too_large(text: str) -> bool:
    if text.isdigit():  # exact (a float would round 2**63 - 1 up); no int() of 5 000 digits
        return len(text.lstrip("0")) > 19 or int(text) > MAX_ROW_COUNT
    try:
        return abs(float(text)) > MAX_ROW_COUNT
    except ValueError:  # not a plain number: the database says what it is
        return False


def check_count_params(gated: GatedStatement, params: dict[str, Any] | None) -> None:
    """OUT_OF_RANGE when a parameter given as LIMIT/OFFSET is an integer beyond 64 bits."""
    for name in gated.count_params:
        value = (params or {}).get(name)
        if isinstance(value, int) and not isinstance(value, bool) \
                and abs(value) > MAX_ROW_COUNT:
            raise SqlError(ErrorCode.OUT_OF_RANGE,
                           f"Parameter :{name} = {value} is too large for LIMIT/OFFSET: a row "
                           f"count is at most {MAX_ROW_COUNT}")


def _qualifier_sources(statement: exp.Expression, registry: SourceRegistry,
                       context: DataSource | None) -> dict[str, DataSource]:
    """Resolve every table to its data source and strip the source qualifier in place."""
    ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
    used: dict[str, DataSource] = {}
    stripped: set[str] = set()
    for table in list(statement.find_all(exp.Table)):
        if not table.name:  # a table function: generate_series(1, 3)
            continue
        catalog, db = table.catalog, table.db
        if catalog:
            source = registry.require(catalog)
            table.set("catalog", None)
            stripped.add(catalog.lower())
        elif db and registry.get(db) is not None:
            source = registry.get(db)
            table.set("db", None)
            stripped.add(db.lower())
        elif db:
            if context is None:
                raise SqlError(ErrorCode.UNKNOWN_SOURCE,
                               f"'{db}' in {table.sql()} is not a data source; configured "
                               f"data sources: {', '.join(registry.names()) or 'none'}")
            source = context  # a schema (PostgreSQL) or database (MySQL) inside it
        elif table.name.lower() in ctes:
            continue
        elif context is not None:
            source = context
        else:
            raise SqlError(ErrorCode.UNKNOWN_TABLE,
                           f"Table '{table.name}' names no data source: write "
                           f"<source>.{table.name} or set context.db to a data source "
                           f"({', '.join(registry.names()) or 'none configured'})")
        used[source.name] = source
    # Column references written source.table.column lose the source part too.
    for column in statement.find_all(exp.Column):
        for part in ("catalog", "db"):
            value = column.args.get(part)
            if value is not None and value.name.lower() in stripped:
                column.set(part, None)
    return used


def gate(query: str, registry: SourceRegistry, context_db: str | None) -> GatedStatement:
    """Parse, check and rewrite ``query`` for the one data source it reads."""
    key = (query, context_db.lower() if context_db else None)
    cached = registry.gate_cache.get(key)
    if cached is not None and _still_current(cached, registry):
        if isinstance(cached, _CrossSource):
            raise SqlError(ErrorCode.CROSS_SOURCE, cached.message)
        return cached
    try:
        gated = _gate(query, registry, context_db)
    except SqlError as exc:
        # A statement over several sources is gated by each caller that routes it (the
        # dispatch, ``federation/route.py``): its answer is kept as well as a success.
        if exc.code == ErrorCode.CROSS_SOURCE:
            registry.gate_cache.put(key, _CrossSource(exc.message))
        raise
    registry.gate_cache.put(key, gated)
    return gated


@dataclass(frozen=True)
class _CrossSource:
    """A kept answer of the gate: the statement reads several data sources."""

    message: str
    source: None = None


def _still_current(gated: GatedStatement | _CrossSource, registry: SourceRegistry) -> bool:
    """Whether a cached statement's source is still the one its name gives: a source
    created at run time may have been changed or dropped through another worker since (the
    lookup checks the store's catalog version, once per request)."""
    source = gated.source
    return source is None or registry.is_configured(source.name) \
        or registry.get(source.name) is source


def _gate(query: str, registry: SourceRegistry, context_db: str | None) -> GatedStatement:
    context = registry.get(context_db) if context_db else None
    if context is not None:
        dialect = context.sqlglot_dialect
        statement = parse_single(query, dialect)
    else:
        # The source (and so the dialect) is known only from the qualifiers: find them with
        # the generic dialect (or failing that, a source's), then parse again in the
        # source's own dialect.
        statement, dialect = parse_any(query, registry)
    check_read_only(statement, dialect)
    used = _qualifier_sources(statement, registry, context)
    if len(used) > 1:
        raise SqlError(ErrorCode.CROSS_SOURCE,
                       f"The statement reads from {len(used)} data sources "
                       f"({', '.join(sorted(used))}); one statement runs on one data source")
    source = next(iter(used.values()), None) or context
    target = source or registry.constants
    if target is not None and dialect != target.sqlglot_dialect:
        statement = parse_single(query, target.sqlglot_dialect)
        check_read_only(statement, target.sqlglot_dialect)
        _qualifier_sources(statement, registry, context)
    if target is not None:
        check_functions(statement, target)
    if (target.sqlglot_dialect if target else "sqlite") == "sqlite":
        _keep_comma_joins(statement, query)
    if source is None:
        _name_constants(statement)
    count_params = check_row_counts(statement)
    sql, names = _render(statement, target.dialect if target else "sqlite",
                         target.sqlglot_dialect if target else "sqlite")
    return GatedStatement(source=source, sql=sql, param_names=tuple(names),
                          count_params=count_params)


def _name_constants(statement: exp.Expression) -> None:
    """Name a table-less SELECT's string constants as MindsDB does: ``SELECT 'a'`` and
    ``SELECT "a"`` (a string in MindsDB's MySQL dialect) answer a column ``a``."""
    select = statement
    while isinstance(select, exp.SetOperation):  # the first branch names the columns
        select = select.this
    if not isinstance(select, exp.Select) or select.args.get("from_") is not None:
        return
    for item in list(select.expressions):
        if isinstance(item, exp.Column) and not item.table and item.this.quoted:
            value = item.name
        elif isinstance(item, exp.Literal) and item.is_string:
            value = item.this
        else:
            continue
        if value:
            item.replace(exp.alias_(exp.Literal.string(value), value, quoted=True))


_CROSS_WORD = re.compile(r"\bcross\b", re.IGNORECASE)


def _keep_comma_joins(statement: exp.Expression, query: str) -> None:
    """Write ``FROM a, b`` back with its comma, not as ``a CROSS JOIN b``.

    sqlglot reads a comma join in SQLite as a CROSS JOIN (both mean the same rows there),
    but SQLite's planner takes CROSS JOIN as an order: the left table is always the outer
    loop. The text it ran then joined tables in the order written, whatever the indexes:
    TPC-H Q5 took 2.9x as long as the user's own text. Only when the query has no word
    CROSS at all is every CROSS join known to be a comma; otherwise all are left as read.
    """
    if _CROSS_WORD.search(query):
        return
    for join in statement.find_all(exp.Join):
        if join.args.get("kind") == "CROSS" and not join.args.get("side") \
                and not join.args.get("on") and not join.args.get("using"):
            join.set("kind", None)


def parse_any(query: str, registry: SourceRegistry) -> tuple[exp.Expression, str | None]:
    """The statement parsed generically, or else in the first sources' dialect that reads it
    (a SYNTAX error of the generic parse is re-raised when none does); that dialect."""
    try:
        return parse_single(query, None), None
    except SqlError as exc:
        if exc.code != ErrorCode.SYNTAX:
            raise
        for glot in registry.dialects():
            try:
                return parse_single(query, glot), glot
            except SqlError:
                continue
        raise


def _render(statement: exp.Expression, dialect: str, glot: str) -> tuple[str, list[str]]:
    """SQL text for the driver, with :name placeholders in the driver's own style."""
    names: list[str] = []
    sentinels: dict[str, str] = {}
    nonce = secrets.token_hex(6)
    for i, node in enumerate(list(statement.find_all(exp.Placeholder))):
        name = node.name
        if not name or name == "?":
            raise SqlError(ErrorCode.MISSING_PARAMETER,
                           "Positional placeholders (?) are not supported; use :name and "
                           "give params {\"name\": value}")
        sentinel = f"quarryparam{nonce}x{i}"
        sentinels[sentinel] = name
        names.append(name)
        node.replace(exp.var(sentinel))
    for node in statement.find_all(exp.Parameter):
        # PostgreSQL's $1 is a positional bind parameter: the server would refuse the
        # statement with a protocol error (read as the source being down).
        if isinstance(node.this, exp.Literal) and dialect == "postgresql":
            raise SqlError(ErrorCode.MISSING_PARAMETER,
                           f"Positional placeholders (${node.this.name}) are not supported; "
                           f"use :name and give params {{\"name\": value}}")
    try:
        sql = statement.sql(dialect=glot, comments=False)
    except Exception as exc:  # sqlglot cannot write it back in this dialect
        raise SqlError(ErrorCode.SYNTAX,
                       f"The SQL statement cannot be written in the {dialect} dialect: "
                       f"{exc}") from None
    if sentinels:
        if dialect != "sqlite":
            sql = sql.replace("%", "%%")  # pyformat drivers: a literal % must be doubled
        for sentinel, name in sentinels.items():
            sql = sql.replace(sentinel, f":{name}" if dialect == "sqlite" else f"%({name})s")
    return sql, names
