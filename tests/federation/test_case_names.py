"""Columns whose names only their case tells apart from lower case, in a statement over
several sources: PostgreSQL's quoted "customerId" (as ORMs name them) and SQLite's "É"
(SQLite ignores case for ASCII letters only). The plan lower-cases names, since the engine
ignores case; each leg still asks its source for every column by the source's own name, in
what it reads, in the conditions pushed to it, in a join of two of its tables, and in the
keys of a dynamic filter. They failed before with "column o.customerid does not exist"."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from ..helpers import sql_runner
from .conftest import CUSTOMERS, SPLIT_DB, _pg

ORDERS = [(i, 1 + i % 6, i * 1.25) for i in range(1, 13)]  # orderId, customerId, Total
LINES = [(i, i % 3 + 1) for i in range(1, 13) for _ in range(i % 2 + 1)]  # orderId, Qty


@pytest.fixture(scope="module")
def camel(fed_sources, tmp_path_factory):
    with _pg(SPLIT_DB) as conn:
        conn.execute('CREATE TABLE "CamelOrders" ("orderId" int, "customerId" int, '
                     '"Total" numeric(8,2))')
        conn.execute('CREATE TABLE "CamelLines" ("orderId" int, "Qty" int)')
        with conn.cursor() as cur:
            cur.executemany('INSERT INTO "CamelOrders" VALUES (%s, %s, %s)', ORDERS)
            cur.executemany('INSERT INTO "CamelLines" VALUES (%s, %s)', LINES)
    path = tmp_path_factory.mktemp("camel") / "accents.db"
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute('CREATE TABLE accents ("Id" INTEGER, "É" TEXT)')
        lite.executemany("INSERT INTO accents VALUES (?, ?)",
                         [(i, f"é{i}") for i in range(1, 7)])
        lite.commit()
    yield {"pg": fed_sources["pg"], "maria": fed_sources["maria"],
           "accents": f"sqlite:///{path}"}
    with _pg(SPLIT_DB) as conn:
        conn.execute('DROP TABLE "CamelOrders", "CamelLines"')


@pytest.fixture
def run(make_app, camel):
    return sql_runner(make_app(DATA_SOURCES=camel).test_client())


def test_quoted_mixed_case_columns_are_read_filtered_and_keyed_by_their_names(run):
    names = {row[0]: row[1] for row in CUSTOMERS}
    sql = ('SELECT o."orderId", o."Total", c.name FROM pg."CamelOrders" o '
           'JOIN maria.customers c ON c.id = o."customerId" '
           'WHERE o."Total" > 3 AND c.id <= 3 ORDER BY o."orderId"')
    expected = [[order, total, names[customer]] for order, customer, total in ORDERS
                if total > 3 and customer <= 3]
    for _ in range(2):  # planned from the estimates, then with the sizes learnt
        body = run(sql)
        assert [[r[0], float(r[1]), r[2]] for r in body["data"]] == expected, body
    legs = run("EXPLAIN " + sql)["data"]
    pg_leg = next(row[2] for row in legs if row[1] == "pg")
    assert '"o"."customerId"' in pg_leg and '."Total" > 3' in pg_leg, legs


def test_a_join_of_two_such_tables_in_one_leg_and_an_accented_sqlite_column(run):
    accents = {i: f"é{i}" for i in range(1, 7)}
    sql = ('SELECT o."orderId", sum(l."Qty") AS qty, a."É" FROM pg."CamelOrders" o '
           'JOIN pg."CamelLines" l ON l."orderId" = o."orderId" '
           'JOIN accents."accents" a ON a."Id" = o."customerId" '
           'GROUP BY o."orderId", a."É" ORDER BY o."orderId"')
    expected = [[order, sum(q for o, q in LINES if o == order), accents[customer]]
                for order, customer, _ in ORDERS]
    assert run(sql)["data"] == expected
    legs = run("EXPLAIN " + sql)["data"]
    assert any('"l"."Qty"' in row[2] and row[1] == "pg" for row in legs), legs
    assert any('"a"."É"' in row[2] for row in legs), legs
