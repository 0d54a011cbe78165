"""Plans of statements over several tables of several sources (TPC-H Q3 and Q5 in small):
the tables of one source are joined in that source, as one leg, and the keys of the other
sources reach that leg in a shape its planner joins well; a filter that would keep about
every row is not waited for, from the first run.

Each statement is compared with the same statement over one PostgreSQL database holding
every table; the legs' dynamic filters are read from the statement's legs.
"""

from __future__ import annotations

import contextlib
import sqlite3
from datetime import date
from decimal import Decimal

import pytest

from .conftest import ONE_DB, SPLIT_DB, _mysql, _pg
from .test_dynamic_filter import _run

# mt_buyers: 1 200 buyers, a third of them in segment 'A' (400 ids: a VALUES list); each
# has two orders (mt_orders), each order three lines (mt_lines), on 300 different days. The
# PostgreSQL leg of orders and lines (about 3 600 rows) is less than four times the buyers
# MariaDB estimates for a segment (all 1 200: it keeps no histogram); that estimate only
# bounds the leg, and the leg is waited for (dynamic.WAIT_RATIO, dynamic._measured).
BUYERS = [(i, "A" if i % 3 == 0 else "B", i % 10) for i in range(1, 1201)]
ORDERS = [(i, 1 + i % 1200, f"2024-{1 + i % 12:02d}-{1 + i % 25:02d}")
          for i in range(1, 2401)]
LINES = [(o, n, f"{(o * 7 + n) % 100}.{n * 25:02d}") for o in range(1, 2401)
         for n in range(1, 4)]
# mt_days: the 300 order days, in MariaDB (a date key list), the last one twice.
DAYS = sorted({day for _, _, day in ORDERS}) + [max(day for _, _, day in ORDERS)]
# mt_nations: 10 nations in 2 regions; mt_places (SQLite): 40 places over all 10 nations.
NATIONS = [(n, f"nation {n}", "EAST" if n < 5 else "WEST") for n in range(10)]
PLACES = [(p, p % 10) for p in range(40)]


@pytest.fixture(scope="module")
def shop(fed_sources):
    """pg.mt_orders and pg.mt_lines, maria.mt_buyers, maria.mt_nations (keyed),
    maria.mt_days, lite.mt_places; all six in the one database."""
    tables = {
        "mt_orders": ("id integer PRIMARY KEY, buyer_id integer, placed date", ORDERS),
        "mt_lines": ("order_id integer, n integer, price numeric(8,2), "
                     "PRIMARY KEY (order_id, n)", LINES),
        "mt_buyers": ("id integer PRIMARY KEY, segment varchar(1), nation_id integer",
                      BUYERS),
        "mt_nations": ("id integer PRIMARY KEY, name varchar(20), region varchar(10)",
                       NATIONS),
        "mt_days": ("day date", [(day,) for day in DAYS]),
        "mt_places": ("id integer, nation_id integer", PLACES),
    }

    def load(cur, table: str, mark: str) -> None:
        ddl, rows = tables[table]
        cur.execute(f"CREATE TABLE {table} ({ddl})")
        cur.executemany(f"INSERT INTO {table} VALUES ({', '.join([mark] * len(rows[0]))})",
                        rows)

    for database, names in ((SPLIT_DB, ["mt_orders", "mt_lines"]), (ONE_DB, list(tables))):
        with _pg(database) as conn, conn.cursor() as cur:
            for table in names:
                load(cur, table, "%s")
                cur.execute(f"ANALYZE {table}")
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        for table in ("mt_buyers", "mt_nations", "mt_days"):
            load(cur, table, "%s")
            cur.execute(f"ANALYZE TABLE {table}")
            cur.fetchall()
    path = fed_sources["lite"].removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as lite:
        load(lite, "mt_places", "?")
        lite.commit()
    yield
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("DROP TABLE mt_places")


def _split_and_one(template: str) -> tuple[str, str]:
    places = {"mt_orders": "pg", "mt_lines": "pg", "mt_buyers": "maria",
              "mt_nations": "maria", "mt_days": "maria", "mt_places": "lite"}
    return (template.format(**{t: f"{s}.{t}" for t, s in places.items()}),
            template.format(**{t: f"one.{t}" for t in places}))


def _same(fquery, rows: list, one: str) -> None:
    """``rows`` (read in-process) are the one database's answer to ``one`` (as JSON)."""
    want = fquery(one)
    assert want["type"] == "table" and want["data"], want
    assert [[_plain(v) for v in row] for row in rows] == \
        [[_plain(v) for v in row] for row in want["data"]]


def _explained(fquery, sql: str) -> tuple[dict[str, list], list]:
    """EXPLAIN's legs by source name (one leg per source here), and its engine step."""
    steps = fquery("EXPLAIN " + sql)["data"]
    return {step[1]: step for step in steps[:-1]}, steps[-1]


def _plain(value):
    if isinstance(value, date):
        return value.isoformat()
    return float(value) if isinstance(value, float | Decimal) else value


# TPC-H Q3 in small: the buyers of a segment (MariaDB) and their orders' lines, orders and
# lines both in PostgreSQL.
Q3 = ("SELECT o.id, o.placed, sum(l.price) AS total FROM {mt_buyers} b, {mt_orders} o, "
      "{mt_lines} l WHERE b.segment = 'A' AND b.id = o.buyer_id AND l.order_id = o.id "
      "AND o.placed < DATE '2024-07-01' GROUP BY o.id, o.placed ORDER BY total DESC, o.id "
      "LIMIT 15")


def test_one_sources_tables_are_one_leg_cut_by_a_values_list_of_keys(fed_app, fquery,
                                                                      shop):
    split, one = _split_and_one(Q3)
    legs, engine = _explained(fquery, split)
    assert sorted(legs) == ["maria", "pg"], legs
    # orders and lines: one leg that PostgreSQL joins, cut by the segment's buyers.
    assert 'FROM mt_orders AS "o" CROSS JOIN mt_lines AS "l"' in legs["pg"][2], legs
    assert legs["pg"][0].endswith('filtered by keys of leg_0 at run time: "o"."buyer_id" '
                                  "IN (the values of id)"), legs
    # The two tables' integer key equality holds in every row PostgreSQL sends: the engine
    # does not check it again, and the leg sends no column for it.
    assert "l.order_id = o.id" in legs["pg"][2] and '"l"."order_id" AS' not in legs["pg"][2]
    assert "order_id" not in engine[2], engine
    rows, filters = _run(fed_app, split)
    _same(fquery, rows, one)
    # 400 keys: a VALUES list, which PostgreSQL joins as a table of 400 rows.
    assert filters == [[], ['"o"."buyer_id" IN (VALUES …) 400 keys of leg_0']], filters


def test_date_keys_go_as_a_values_list_too(fed_app, fquery, shop):
    split, one = _split_and_one(
        "SELECT o.id, l.n, l.price FROM {mt_days} d JOIN {mt_orders} o ON o.placed = d.day "
        "JOIN {mt_lines} l ON l.order_id = o.id WHERE o.id % 7 = 0 ORDER BY o.id, l.n")
    rows, filters = _run(fed_app, split)
    _same(fquery, rows, one)
    assert filters == [[], ['"o"."placed" IN (VALUES …) 300 keys of leg_0']], filters


def test_fewer_keys_stay_a_list_of_constants(fed_app, fquery, shop):
    split, one = _split_and_one(Q3.replace("b.segment = 'A'", "b.id < 300"))
    rows, filters = _run(fed_app, split)
    _same(fquery, rows, one)
    assert filters == [[], ['"o"."buyer_id" IN 299 keys of leg_0']], filters


# TPC-H Q5 in small: the places (SQLite, every nation) and the buyers of one region
# (MariaDB, buyers joined with nations there).
Q5 = ("SELECT n.name, count(*) AS buyers FROM {mt_buyers} b, {mt_nations} n, "
      "{mt_places} p WHERE b.nation_id = p.nation_id AND p.nation_id = n.id "
      "AND n.region = 'EAST' AND b.segment = 'A' GROUP BY n.name ORDER BY n.name")


def test_keys_that_cover_a_joined_column_cover_the_columns_it_equals(fed_app, fquery,
                                                                     shop):
    # The places' 10 nation ids are every id of mt_nations (its key counts 10 values): the
    # MariaDB leg, where buyers.nation_id = nations.id, would keep every row cut by them on
    # either column. mt_buyers.nation_id has no index: MariaDB cannot count its values.
    split, one = _split_and_one(Q5)
    legs, _ = _explained(fquery, split)
    assert "CROSS JOIN mt_nations" in legs["maria"][2], legs
    assert "filtered by keys" not in legs["maria"][0], legs
    rows, filters = _run(fed_app, split)
    assert len(rows) == 5
    _same(fquery, rows, one)
    assert filters == [[], []], filters
