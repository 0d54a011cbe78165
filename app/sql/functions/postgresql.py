"""The function policy of PostgreSQL data sources: an allow-list the source's catalog decides.

A name list of forbidden functions can never be complete (``ts_stat`` ran SQL text past the
old one), so the rule is the other way round. A function a statement calls may run when
every function of that name in the source's ``pg_proc`` is

- built in (OID below 16384, PostgreSQL's first OID for objects made after initdb) and
  marked immutable or stable, or one of ``HARMLESS_VOLATILE``; or
- named in the source's ``allow_functions`` option (the operator's decision, e.g. for an
  extension such as pg_trgm);

and the name is not in ``REFUSED_BY_NAME`` (functions that run SQL text of their own, or
that have a lasting effect although PostgreSQL marks them stable). Every overload counts,
in every schema: the gate cannot know the argument types, so it cannot know which overload
PostgreSQL would pick. A name that is no function at all is refused too, unless the server
lists it as an SQL keyword (``COALESCE(…)``, ``ROW(…)``: syntax, not calls).

Calls are found twice, and both must pass: in the parse tree (sqlglot's names for the
functions it does not know) and in the SQL text the gate will run (``statement_refusal``
tokenises it and checks every ``name(`` in it), so that a function sqlglot renders under
another name (``GROUP_CONCAT`` → ``STRING_AGG``) is checked under the name PostgreSQL sees.
Casts to types whose input/output functions, domain checks or casts are not allowed, field
notation (``t.f`` calls ``f(t)``), ``TABLESAMPLE`` methods and operators whose functions are
not allowed are refused as well.

The catalog is read once per source and process: at start (over the connection that checks
the source's account), or on first use through the source's own pool if the source was down.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any

from sqlalchemy import exc as sa_exc
from sqlglot import exp
from sqlglot.dialects.postgres import Postgres
from sqlglot.tokens import TokenType

from ..errors import ErrorCode, SqlError
from .base import FunctionPolicy

# PostgreSQL assigns OIDs below this to the objects initdb creates (FirstNormalObjectId).
FIRST_NORMAL_OID = 16384

# Volatile built-ins with no effect a request could leave behind: clocks and random values,
# sleeps (the statement time limit cancels them), and sizes and states read from the server.
HARMLESS_VOLATILE = frozenset({
    "random", "clock_timestamp", "timeofday", "gen_random_uuid",
    "pg_sleep", "pg_sleep_for", "pg_sleep_until",
    "pg_relation_size", "pg_table_size", "pg_indexes_size", "pg_total_relation_size",
    "pg_database_size", "pg_tablespace_size", "pg_is_in_recovery", "pg_jit_available",
    "pg_partition_tree", "pg_partition_ancestors", "pg_blocking_pids",
})

# Refused whatever their volatility: they run SQL text (or a whole table, schema or
# database) through their own executor, out of the gate's sight, or they change state.
_SQL_TEXT = "it runs SQL of its own, which the gate cannot check"
REFUSED_BY_NAME: dict[str, str] = {
    "ts_stat": _SQL_TEXT,
    "ts_rewrite": _SQL_TEXT,
    "query_to_xml": _SQL_TEXT, "query_to_xmlschema": _SQL_TEXT,
    "query_to_xml_and_xmlschema": _SQL_TEXT,
    "cursor_to_xml": _SQL_TEXT, "cursor_to_xmlschema": _SQL_TEXT,
    "table_to_xml": _SQL_TEXT, "table_to_xmlschema": _SQL_TEXT,
    "table_to_xml_and_xmlschema": _SQL_TEXT,
    "schema_to_xml": _SQL_TEXT, "schema_to_xmlschema": _SQL_TEXT,
    "schema_to_xml_and_xmlschema": _SQL_TEXT,
    "database_to_xml": _SQL_TEXT, "database_to_xmlschema": _SQL_TEXT,
    "database_to_xml_and_xmlschema": _SQL_TEXT,
    # Extensions (refused anyway unless allowed; named so that allow_functions cannot).
    "crosstab": _SQL_TEXT, "crosstab2": _SQL_TEXT, "crosstab3": _SQL_TEXT,
    "crosstab4": _SQL_TEXT, "connectby": _SQL_TEXT, "xpath_table": _SQL_TEXT,
    "txid_current": "it assigns a transaction id (a lasting effect)",
    "pg_current_xact_id": "it assigns a transaction id (a lasting effect)",
}
REFUSED_PREFIXES: dict[str, str] = {"dblink": "it connects to a database and runs SQL there"}

# Built-in TABLESAMPLE methods (their handlers are marked volatile, but only sample rows).
TABLESAMPLE_METHODS = frozenset({"bernoulli", "system"})

_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*\Z")
_OPERATOR_CHARS = set("+-*/<>=~!@#%^&|`?")
_LITERALS = {TokenType.STRING, TokenType.NUMBER, TokenType.BYTE_STRING,
             TokenType.NATIONAL_STRING, TokenType.RAW_STRING, TokenType.HEREDOC_STRING,
             TokenType.UNICODE_STRING, TokenType.BIT_STRING, TokenType.HEX_STRING}

_FUNCTIONS_SQL = """
SELECT p.oid, p.proname, p.provolatile, p.prokind, p.pronargs, p.pronargdefaults,
       (SELECT t.typtype = 'c' OR t.typname IN ('record', 'any', 'anyelement',
               'anynonarray', 'anycompatible', 'anycompatiblenonarray')
        FROM pg_type t WHERE t.oid = p.proargtypes[0]) AS takes_a_row
FROM pg_proc p
"""
_TYPES_SQL = """
SELECT oid, typname, typinput::oid, typoutput::oid, typmodin::oid, typmodout::oid, typtype,
       typbasetype
FROM pg_type
"""
_CASTS_SQL = "SELECT castsource, casttarget, castfunc FROM pg_cast WHERE castfunc <> 0"
_DOMAIN_CHECKS_SQL = """
SELECT c.contypid, d.refobjid
FROM pg_constraint c
JOIN pg_depend d ON d.classid = 'pg_constraint'::regclass AND d.objid = c.oid
                AND d.refclassid = 'pg_proc'::regclass
WHERE c.contypid <> 0
"""
_OPERATORS_SQL = "SELECT oprname, oprcode::oid, oprrest::oid, oprjoin::oid FROM pg_operator"
_KEYWORDS_SQL = "SELECT word FROM pg_get_keywords()"


@dataclass(frozen=True)
class PgCatalog:
    """What the gate needs to know of one source's catalog."""

    functions: dict[str, str | None]   # name -> None (allowed) or why not
    keywords: frozenset[str]           # the server's SQL keywords
    refused_types: dict[str, str]      # type name -> the function that makes it unsafe
    refused_operators: frozenset[str]  # operators whose functions are not allowed
    field_functions: frozenset[str]    # refused functions that t.f notation could call


def name_refusal(name: str) -> str | None:
    """Why ``name`` is refused whatever the catalog says; None if it is not."""
    if name in REFUSED_BY_NAME:
        return REFUSED_BY_NAME[name]
    for prefix, why in REFUSED_PREFIXES.items():
        if name.startswith(prefix):
            return why
    return None


def _row_refusal(name: str, oid: int, volatile: str, kind: str,
                 allowed_extra: frozenset[str]) -> str | None:
    """Why one pg_proc row is not allowed; None if it is."""
    by_name = name_refusal(name)
    if by_name is not None:
        return by_name
    if name in allowed_extra:
        return None
    if kind == "p":
        return "it is a procedure"
    if oid >= FIRST_NORMAL_OID:
        return ("it is not one of PostgreSQL's built-in functions (user-defined or from an "
                "extension; the source's allow_functions option can allow it)")
    if volatile == "v" and name not in HARMLESS_VOLATILE:
        return ("PostgreSQL marks it volatile: it may have effects beyond reading (built-in "
                "functions marked immutable or stable are allowed)")
    return None


def load_catalog(pg: Any, allowed_extra: frozenset[str]) -> PgCatalog:
    """Read the allow-list's inputs from a psycopg connection to the source."""
    functions: dict[str, str | None] = {}
    allowed_oids: set[int] = set()
    names: dict[int, str] = {}
    field_candidates: dict[str, bool] = {}
    for oid, name, volatile, kind, nargs, ndefaults, takes_a_row in pg.execute(_FUNCTIONS_SQL):
        names[oid] = name
        why = _row_refusal(name, oid, volatile, kind, allowed_extra)
        if why is None:
            allowed_oids.add(oid)
            functions.setdefault(name, None)
        elif functions.get(name) is None:
            functions[name] = why  # one refused overload refuses the name
        # t.f is f(t) when f takes one argument a row can be passed as.
        if nargs >= 1 and nargs - ndefaults <= 1 and takes_a_row:
            field_candidates[name] = True
    keywords = frozenset(row[0].lower() for row in pg.execute(_KEYWORDS_SQL))

    def unsafe(func_oid: int) -> bool:
        return bool(func_oid) and func_oid not in allowed_oids

    types = list(pg.execute(_TYPES_SQL))
    by_oid = {row[0]: row for row in types}
    why_type: dict[int, str] = {}
    for oid, _name, *io, _kind, _base in types:
        bad = [f for f in io if unsafe(f)]
        if bad:
            why_type[oid] = f"its input/output function {names.get(bad[0], bad[0])}()"
    for source, target, func in pg.execute(_CASTS_SQL):
        if unsafe(func):
            why_type.setdefault(source, f"its cast function {names.get(func, func)}()")
            why_type.setdefault(target, f"its cast function {names.get(func, func)}()")
    for domain, func in pg.execute(_DOMAIN_CHECKS_SQL):
        if unsafe(func):
            why_type.setdefault(domain, f"its domain check's function {names.get(func, func)}()")
    # A domain over an unsafe type is unsafe (domains may nest).
    for oid, row in by_oid.items():
        base, seen = row[7], 0
        while base and base not in why_type and seen < 32:
            base, seen = by_oid[base][7] if base in by_oid else 0, seen + 1
        if base and base in why_type:
            why_type.setdefault(oid, why_type[base])
    refused_types = {by_oid[oid][1]: why for oid, why in why_type.items() if oid in by_oid}

    refused_operators = frozenset(
        name for name, code, rest, join in pg.execute(_OPERATORS_SQL)
        if unsafe(code) or unsafe(rest) or unsafe(join))
    field_functions = frozenset(n for n in field_candidates if functions.get(n) is not None)
    return PgCatalog(functions, keywords, refused_types, refused_operators, field_functions)


class PostgresPolicy(FunctionPolicy):
    """The allow-list of one PostgreSQL source, read from its catalog on first use."""

    def __init__(self) -> None:
        self._source: Any = None
        self._catalog: PgCatalog | None = None
        self._lock = threading.Lock()

    def bind(self, source: Any) -> None:
        self._source = source

    # -- the catalog ---------------------------------------------------------------------

    def catalog(self) -> PgCatalog:
        """The source's catalog, read once (thread-safe); SOURCE_DOWN/BUSY if unreachable."""
        if self._catalog is not None:
            return self._catalog
        with self._lock:
            if self._catalog is None:
                self._catalog = self._read_catalog()
        return self._catalog

    def warm(self, dbapi_connection: Any) -> None:
        with self._lock:
            if self._catalog is None:
                self._catalog = load_catalog(
                    dbapi_connection, frozenset(getattr(self._source, "allow_functions", ())))

    def _read_catalog(self) -> PgCatalog:
        source = self._source
        if source is None:
            raise RuntimeError("PostgresPolicy used without a data source (bind it first)")
        try:
            conn = source.connect()
        except sa_exc.TimeoutError:
            raise SqlError(ErrorCode.BUSY,
                           f"Data source '{source.name}' is busy: no free connection; "
                           f"try again shortly") from None
        except Exception as exc:
            raise SqlError(ErrorCode.SOURCE_DOWN,
                           f"Data source '{source.name}' cannot be reached: "
                           f"{_first_line(exc)}") from None
        try:
            return load_catalog(conn.driver_connection,
                                frozenset(getattr(source, "allow_functions", ())))
        except Exception as exc:
            conn.invalidate()
            raise SqlError(ErrorCode.SOURCE_DOWN,
                           f"Data source '{source.name}': its function catalog cannot be "
                           f"read: {_first_line(exc)}") from None
        finally:
            conn.close()

    # -- the checks ----------------------------------------------------------------------

    def _source_name(self) -> str:
        return getattr(self._source, "name", "?")

    def _function_refusal(self, name: str, quoted: bool = False) -> str | None:
        """None if every function called ``name`` may run (or, unquoted, it is SQL syntax)."""
        catalog = self.catalog()
        why = name_refusal(name)
        if why is None and name in catalog.functions:
            why = catalog.functions[name]
        elif why is None and (quoted or name not in catalog.keywords):
            why = "no function of that name exists"
        if why is None:
            return None
        return f"Function {name}() is not allowed on data source '{self._source_name()}': {why}"

    def refusal(self, node: exp.Expression) -> str | None:
        if isinstance(node, exp.Anonymous | exp.AnonymousAggFunc):
            return self._function_refusal(str(node.name).lower())
        if isinstance(node, exp.DataType):
            return self._type_refusal(node)
        if isinstance(node, exp.Column) and node.table:
            return self._field_refusal(node.name)
        if isinstance(node, exp.Dot) and isinstance(node.expression, exp.Identifier):
            return self._field_refusal(node.expression.name)
        if isinstance(node, exp.Operator):
            return self._operator_refusal(str(node.args.get("operator") or "").split(".")[-1])
        return None

    def _type_refusal(self, node: exp.DataType) -> str | None:
        refused = self.catalog().refused_types
        if not refused:
            return None
        try:
            written = node.sql(dialect="postgres")
        except Exception:  # noqa: BLE001 - then the gate cannot write the statement either
            return None
        text = re.sub(r"\(.*\)|\[.*\]", "", written).strip()
        last = text.split(".")[-1].strip()
        name = last[1:-1] if last.startswith('"') and last.endswith('"') else last.lower()
        if name in refused:
            return (f"Casts to type {name} are not allowed on data source "
                    f"'{self._source_name()}': {refused[name]} is not on the allow-list")
        return None

    def _field_refusal(self, name: str) -> str | None:
        if name.lower() in self.catalog().field_functions:
            return (f"{name} is not allowed on data source '{self._source_name()}': written "
                    f"as a column of a row it calls function {name.lower()}(), which is not "
                    f"allowed")
        return None

    def _operator_refusal(self, operator: str) -> str | None:
        if operator in self.catalog().refused_operators:
            return (f"Operator {operator} is not allowed on data source "
                    f"'{self._source_name()}': its function is not on the allow-list")
        return None

    def statement_refusal(self, statement: exp.Expression) -> str | None:
        """Check every call in the SQL text that will run (as PostgreSQL will read it)."""
        try:
            sql = statement.sql(dialect="postgres", comments=False)
        except Exception:  # noqa: BLE001 - the gate's own rendering reports it as SYNTAX
            return None
        try:
            tokens = Postgres().tokenize(sql)
        except Exception:  # noqa: BLE001 - what cannot be read cannot be checked: refuse
            return (f"The statement's functions cannot be checked for data source "
                    f"'{self._source_name()}'")
        ctes = {cte.alias_or_name.lower() for cte in statement.find_all(exp.CTE)}
        for i, token in enumerate(tokens[:-1]):
            if tokens[i + 1].token_type != TokenType.L_PAREN:
                continue
            name = _call_name(token)
            if name is None:
                continue
            before = tokens[i - 1] if i else None
            after_as = before is not None and before.text.upper() == "AS" \
                and before.token_type != TokenType.IDENTIFIER
            if after_as:
                continue  # a type's modifiers, CAST(x AS numeric(10, 2)), or an alias's columns
            if before is not None and before.token_type == TokenType.TABLE_SAMPLE:
                if name.lower() in TABLESAMPLE_METHODS:
                    continue
            elif name.lower() in ctes and _is_cte_columns(tokens, i + 1):
                continue  # WITH t(a, b) AS (…)
            refusal = self._function_refusal(name, token.token_type == TokenType.IDENTIFIER)
            if refusal is not None:
                return refusal
        return self._operators_in(tokens)

    def _operators_in(self, tokens: list) -> str | None:
        """Refuse an operator (a run of adjacent operator characters) whose functions are
        not allowed; only a database whose owner defined such operators has any."""
        runs, run, last_end = [], "", -2
        for token in tokens:
            is_op = (token.token_type not in _LITERALS
                     and token.token_type != TokenType.IDENTIFIER
                     and bool(token.text) and set(token.text) <= _OPERATOR_CHARS)
            if is_op and token.start == last_end + 1 and run:
                run += token.text
            else:
                runs.append(run)
                run = token.text if is_op else ""
            last_end = token.end
        runs.append(run)
        runs = [r for r in runs if r]
        refused = self.catalog().refused_operators if runs else frozenset()
        for run in runs:
            if run in refused:
                return self._operator_refusal(run)
        return None


def _call_name(token: Any) -> str | None:
    """The function name a token before ``(`` calls, as PostgreSQL reads it; None if it
    cannot be a name (a literal, an operator, a bracket)."""
    if token.token_type == TokenType.IDENTIFIER:
        return token.text  # quoted: exactly as written
    if token.token_type in _LITERALS or not _WORD.match(token.text):
        return None
    return token.text.lower()


def _is_cte_columns(tokens: list, open_index: int) -> bool:
    """Whether the parenthesis at ``open_index`` closes right before ``AS (`` (a CTE's
    column list: a call is never followed by AS and a parenthesis in generated SQL)."""
    depth = 0
    for j in range(open_index, len(tokens)):
        kind = tokens[j].token_type
        if kind == TokenType.L_PAREN:
            depth += 1
        elif kind == TokenType.R_PAREN:
            depth -= 1
            if depth == 0:
                rest = [t.text.upper() for t in tokens[j + 1:j + 4]]
                return bool(rest) and rest[0] == "AS" and (
                    "(" in rest[1:3] or "MATERIALIZED" in rest[1:3])
    return False


def _first_line(exc: BaseException) -> str:
    if isinstance(exc, sa_exc.DBAPIError) and exc.orig is not None:
        exc = exc.orig
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
