"""How many rows a gated SELECT will return, asked of its data source before it runs.

A federated statement orders its legs and chooses its dynamic filters (``federation/``)
from these figures the first time it runs, on whichever worker gets it: each source
answers from its own statistics, without reading the rows.

- PostgreSQL: the planner's row estimate of the statement (``EXPLAIN (FORMAT JSON)``,
  which plans and runs nothing), in the same READ ONLY transaction and time limit as a
  statement.
- MariaDB/MySQL: ``EXPLAIN``'s ``rows`` × ``filtered`` of each table, multiplied (the rows
  its nested loops are expected to produce).
- SQLite has no row estimate of a statement: a count of the statement's rows, stopped at
  ``bound`` (SQLite reads its own file; counting a few hundred thousand rows takes
  milliseconds).

An estimate never fails the statement: a source that cannot give one answers None, and the
statement is planned without it.

``key_range`` asks a PostgreSQL or MariaDB/MySQL table for its integer primary key and the
key's smallest and largest values (read from the key's index, not the rows), so that a
large table can be read in ranges of it in parallel (``federation/spark.py``).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

from sqlglot import exp

from .execute import begin_mysql, begin_postgresql, checkout, reset_mysql_session
from .sources import DataSource

log = logging.getLogger(__name__)

# A SQLite statement is counted up to this many rows; beyond, it is "at least this many".
SQLITE_BOUND = 1_000_000
# An estimate is for planning: it is given at most this long, however long the statement's
# own time limit is.
MAX_SECONDS = 2.0


def estimate_rows(source: DataSource, sql: str, timeout_s: float,
                  bound: int = SQLITE_BOUND) -> int | None:
    """The rows the gated SELECT ``sql`` (no parameters) is expected to return on
    ``source``; None when the source gives no figure."""
    return _ask(source, timeout_s, "row estimate", {
        "postgresql": lambda conn, seconds: _postgresql(conn, sql, seconds),
        "mysql": lambda conn, seconds: _mysql(conn, sql, seconds),
        "sqlite": lambda conn, seconds: _sqlite(conn, sql, seconds, bound)})


def _ask(source: DataSource, timeout_s: float, what: str,
         readers: dict[str, Callable[[Any, float], Any]]) -> Any:
    """What the reader of the source's dialect reads on one of its pooled connections,
    given at most MAX_SECONDS; None when the dialect has no reader, or anything fails (no
    statistics, a time limit): the statement is planned without the figure."""
    reader = readers.get(source.dialect)
    if reader is None:
        return None
    try:
        conn = checkout(source)
    except Exception:  # busy or down: the statement itself will say so
        return None
    try:
        return reader(conn, max(min(timeout_s, MAX_SECONDS), 0.001))
    except Exception as exc:  # noqa: BLE001 - a plan without the figure, never a failure
        log.debug("no %s from %s: %s", what, source.name, exc)
        if conn.is_valid:
            conn.invalidate()  # its transaction state is unknown: never back to the pool
        return None
    finally:
        conn.close()


# The primary key's columns of one table and their types, from each server's catalog as
# any account that may read the table sees it: PostgreSQL's information_schema shows keys
# only to the table's owner, MariaDB's table_constraints only to an account with more than
# SELECT. MariaDB/MySQL always name the primary key PRIMARY.
_PG_PRIMARY_KEY = (
    "SELECT a.attname, format_type(a.atttypid, NULL) FROM pg_index i "
    "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
    "WHERE i.indrelid = to_regclass(%s) AND i.indisprimary")
_MYSQL_PRIMARY_KEY = (
    "SELECT k.column_name, t.data_type FROM information_schema.key_column_usage k "
    "JOIN information_schema.columns t ON t.table_schema = k.table_schema "
    "AND t.table_name = k.table_name AND t.column_name = k.column_name "
    "WHERE k.constraint_name = 'PRIMARY' AND k.table_schema = {schema} "
    "AND k.table_name = %s")
_INTEGER_TYPES = {"smallint", "integer", "bigint", "int", "tinyint", "mediumint"}


def key_range(source: DataSource, schema: str | None, table: str, timeout_s: float
              ) -> tuple[str, int, int] | None:
    """(column, smallest, largest value) of the table's primary key when it is one
    integer column of a table holding rows; None otherwise, or when the source cannot
    say (a view, no rights on the catalog, a time limit): the table is then read as
    one range."""
    return _ask(source, timeout_s, f"key range of {table}", {
        "postgresql": lambda conn, seconds: _pg_key_range(conn, schema, table, seconds),
        "mysql": lambda conn, seconds: _mysql_key_range(conn, schema, table, seconds)})


def _bounds_sql(column: str, schema: str | None, table: str, dialect: str) -> str:
    key = exp.column(column, quoted=True)
    return exp.select(exp.Min(this=key), exp.Max(this=key)) \
        .from_(exp.table_(table, db=schema, quoted=True)).sql(dialect=dialect)


def _pg_key_range(conn: Any, schema: str | None, table: str, timeout_s: float
                  ) -> tuple[str, int, int] | None:
    pg = conn.driver_connection
    begin_postgresql(pg, timeout_s)
    try:
        name = exp.table_(table, db=schema, quoted=True).sql(dialect="postgres")
        keys = pg.execute(_PG_PRIMARY_KEY, [name]).fetchall()
        if len(keys) != 1 or str(keys[0][1]).lower() not in _INTEGER_TYPES:
            return None
        column = keys[0][0]
        low, high = pg.execute(_bounds_sql(column, schema, table, "postgres")).fetchone()
    finally:
        pg.execute("ROLLBACK")
    return None if low is None else (column, int(low), int(high))


def _mysql_key_range(conn: Any, schema: str | None, table: str, timeout_s: float
                     ) -> tuple[str, int, int] | None:
    cursor = conn.driver_connection.cursor()
    try:
        begin_mysql(conn, cursor, timeout_s)
        cursor.execute(_MYSQL_PRIMARY_KEY.format(schema="%s" if schema else "DATABASE()"),
                       [schema, table] if schema else [table])
        keys = cursor.fetchall()
        if len(keys) != 1 or str(keys[0][1]).lower() not in _INTEGER_TYPES:
            return None
        column = keys[0][0]
        cursor.execute(_bounds_sql(column, schema, table, "mysql"))
        low, high = cursor.fetchone()
    finally:
        cursor.close()
        reset_mysql_session(conn)
    return None if low is None else (column, int(low), int(high))


def _postgresql(conn: Any, sql: str, timeout_s: float) -> int | None:
    pg = conn.driver_connection
    begin_postgresql(pg, timeout_s)
    try:
        row = pg.execute("EXPLAIN (FORMAT JSON) " + sql).fetchone()
    finally:
        pg.execute("ROLLBACK")
    plan = row[0] if row else None
    if isinstance(plan, str):  # the json type read as text (a lenient loader)
        plan = json.loads(plan)
    return int(plan[0]["Plan"]["Plan Rows"])


def _mysql(conn: Any, sql: str, timeout_s: float) -> int | None:
    my = conn.driver_connection
    cursor = my.cursor()
    try:
        begin_mysql(conn, cursor, timeout_s)
        cursor.execute("EXPLAIN " + sql)
        names = [d[0].lower() for d in cursor.description or ()]
        rows = cursor.fetchall()
    finally:
        cursor.close()
        reset_mysql_session(conn)
    if "rows" not in names or not rows:
        return None
    at_rows, at_filtered = names.index("rows"), names.index("filtered") \
        if "filtered" in names else None
    total = 1.0
    for row in rows:
        if row[at_rows] is None:  # a derived table's own line, or "Impossible WHERE"
            continue
        share = float(row[at_filtered]) / 100 if at_filtered is not None and \
            row[at_filtered] is not None else 1.0
        total *= max(float(row[at_rows]) * share, 1.0)
    return int(total)


def _sqlite(conn: Any, sql: str, timeout_s: float, bound: int) -> int | None:
    dbapi = conn.driver_connection
    deadline = time.monotonic() + timeout_s
    dbapi.set_progress_handler(lambda: time.monotonic() > deadline, 1000)
    try:
        row = dbapi.execute(
            f"SELECT count(*) FROM (SELECT 1 FROM (\n{sql}\n) LIMIT {int(bound)})").fetchone()
    finally:
        dbapi.set_progress_handler(None, 0)
    return int(row[0])
