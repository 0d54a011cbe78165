"""Dynamic filters (docs/federation.md): once the legs' sizes are known, a small leg is read
first and a larger leg's query gets ``key IN (the small leg's keys)``; the answer stays the
one the same statement gives in one database.

Each statement runs once to learn its legs' sizes, then again with the filter; both answers
are compared with one PostgreSQL database holding the same rows. Which filter a leg got is
read from the statement's legs (what GET /api/sql/queries lists) and from EXPLAIN.
"""

from __future__ import annotations

import contextlib
import sqlite3
import uuid
from decimal import Decimal

import pytest

from app.federation.run import Limits, federated_select
from app.sql.running import Statement
from app.sql.sources import current_sources

from .conftest import ONE_DB, SPLIT_DB, _mysql, _pg
from .test_federation import SINGLE, SPLIT, _both

# Text keys that a pasted value would break: quotes, a backslash (MariaDB's escape), a
# comment, Unicode beyond the BMP.
WORDS = ["O'Brien", 'say "hi"', "back\\slash", "🌍 world", "x'); DROP TABLE t; --",
         "Zoë", "plain", "tail "]
TAGS = WORDS[:5] + [None]
LABELS = [(w, i) for i, w in enumerate(WORDS * 3 + [f"other {n}" for n in range(30)])]


@pytest.fixture(scope="module")
def text_tables(fed_sources):
    """lite.tags (6 rows, one NULL) and pg.names / maria.labels (54 rows each), and the
    same three tables in the one database."""
    path = fed_sources["lite"].removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("CREATE TABLE tags (name TEXT)")
        lite.executemany("INSERT INTO tags VALUES (?)", [(t,) for t in TAGS])
        lite.commit()
    for database, whole in ((SPLIT_DB, False), (ONE_DB, True)):
        with _pg(database) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE names (name text, n integer)")
            cur.executemany("INSERT INTO names VALUES (%s, %s)", LABELS)
            if whole:
                cur.execute("CREATE TABLE tags (name text)")
                cur.executemany("INSERT INTO tags VALUES (%s)", [(t,) for t in TAGS])
                cur.execute("CREATE TABLE labels (name text, n integer)")
                cur.executemany("INSERT INTO labels VALUES (%s, %s)", LABELS)
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE labels (name VARCHAR(40) COLLATE utf8mb4_bin, n INT)")
        cur.executemany("INSERT INTO labels VALUES (%s, %s)", LABELS)
    yield
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("DROP TABLE tags")


def _run(fed_app, sql: str) -> tuple[list, list[list[str]]]:
    """The answer of ``sql`` run in-process (decimals as the JSON answer gives them), and
    each leg's dynamic filters."""
    with fed_app.test_request_context():
        statement = Statement(uuid.uuid4().hex)
        limits = Limits(timeout_s=None, max_rows=10_000, max_bytes=None,
                        max_leg_rows=1_000_000)
        result = federated_select(sql, current_sources(), None, limits, statement)
        rows = [[float(v) if isinstance(v, Decimal) else v for v in row]
                for row in result.rows]
        return rows, [leg.dynamic for leg in statement.legs]


def _same(fed_app, fquery, template: str) -> list[list[str]]:
    """Runs the statement twice (learning, then filtered), each time compared with the one
    database; the filters of the second run ({M}, {N}: the tables ``many``, ``names``)."""
    split = template.format(**SPLIT, M="maria.many", N="pg.names")
    one = template.format(**SINGLE, M="one.many", N="one.names")
    want = fquery(one)
    assert want["type"] == "table", want
    for _ in range(2):
        rows, filters = _run(fed_app, split)
        assert sorted(rows, key=repr) == sorted(want["data"], key=repr)
    return filters


def test_a_small_legs_keys_cut_the_larger_leg(fed_app, fquery):
    sql = ("SELECT o.id, o.amount, c.name FROM {O} o JOIN {C} c ON o.customer_id = c.id "
           "WHERE c.country = 'FR' ORDER BY o.id")
    filters = _same(fed_app, fquery, sql)
    assert filters == [['"o"."customer_id" IN 2 keys of leg_1'], []], filters
    steps = fquery("EXPLAIN " + _both(sql)[0])["data"]
    assert steps[0][0].startswith("leg 1: leg_0; ") and steps[0][0].endswith(
        '; filtered by keys of leg_1 at run time: "o"."customer_id" IN (the values of id)'
    ), steps
    # The same shape with other literals uses the sizes learnt: no key at all, no row read.
    split, one = _both(sql.replace("'FR'", "'ZZ'"))
    rows, filters = _run(fed_app, split)
    assert rows == fquery(one)["data"] == []
    assert filters == [["no rows: leg_1 has no key"], []]


def test_null_keys_of_the_small_leg_are_left_out(fed_app, fquery):
    # customers.score has a NULL; orders.customer_id runs 0..7.
    filters = _same(fed_app, fquery, "SELECT o.id, c.name FROM {O} o JOIN {C} c "
                                     "ON o.customer_id = c.score")
    assert filters == [['"o"."customer_id" IN 5 keys of leg_1'], []], filters


@pytest.mark.parametrize("join, cut", [
    ("{O} o LEFT JOIN {C} c ON o.customer_id = c.id", False),   # orders kept whole
    ("{C} c RIGHT JOIN {O} o ON o.customer_id = c.id", False),
    ("{O} o FULL JOIN {C} c ON o.customer_id = c.id", False),
    ("{O} o RIGHT JOIN {C} c ON o.customer_id = c.id", True),   # orders: the NULL side
    ("{C} c LEFT JOIN {O} o ON o.customer_id = c.id", True),
    ("{O} o LEFT JOIN {C} c ON o.customer_id = c.id WHERE o.customer_id = c.id", True),
])
def test_the_preserved_side_of_an_outer_join_is_never_cut(fed_app, fquery, join, cut):
    filters = _same(fed_app, fquery, f"SELECT o.id, c.name FROM {join}")
    pg = filters[0] if join.startswith("{O}") else filters[1]
    assert bool(pg) is cut, filters


def test_text_keys_with_quotes_and_unicode_reach_both_dialects(fed_app, fquery,
                                                               text_tables):
    for table in ("pg.names", "maria.labels"):
        sql = (f"SELECT x.name, x.n FROM {table} x JOIN lite.tags t ON x.name = t.name "
               "ORDER BY x.n")
        one = sql.replace(table, "one." + table.split(".")[1]).replace("lite.", "one.")
        want = fquery(one)["data"]
        assert len(want) == 15, want  # every word of TAGS but NULL, three times
        for _ in range(2):
            rows, filters = _run(fed_app, sql)
            assert rows == want
        assert filters[0] and "IN 5 keys of leg_1" in filters[0][0], filters


def test_over_the_key_limit_integers_go_as_a_range_and_text_not_at_all(
        fed_app, fquery, text_tables, monkeypatch):
    monkeypatch.setitem(fed_app.config, "FEDERATION_DYNAMIC_KEYS", 7)
    sql = "SELECT o.id, c.name FROM {O} o JOIN {C} c ON o.customer_id = c.id"
    _same(fed_app, fquery, sql)
    monkeypatch.setitem(fed_app.config, "FEDERATION_DYNAMIC_KEYS", 5)  # 6 customers
    split, one = _both(sql)
    rows, filters = _run(fed_app, split)
    assert sorted(rows) == sorted(fquery(one)["data"])
    assert filters[0] == ['"o"."customer_id" BETWEEN 1 AND 6 (the key range of leg_1)']
    # Ten labels of 54 pass the tags' keys test above; with a limit of 4 text keys, none.
    monkeypatch.setitem(fed_app.config, "FEDERATION_DYNAMIC_KEYS", 4)
    rows, filters = _run(fed_app, "SELECT x.n FROM pg.names x JOIN lite.tags t "
                                  "ON x.name = t.name")
    assert len(rows) == 15 and filters[0] == [], filters
    monkeypatch.setitem(fed_app.config, "FEDERATION_DYNAMIC_KEYS", 0)  # off
    steps = fquery("EXPLAIN " + split)["data"]
    assert "filtered" not in steps[0][0]


@pytest.fixture(scope="module")
def many(fed_sources):
    """maria.many and one.many: 400 rows, k = 0..19 twenty times each (more than four
    times the legs whose keys cut it: dynamic.WAIT_RATIO)."""
    rows = [(i, i % 20) for i in range(400)]
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE many (id INT, k INT)")
        cur.executemany("INSERT INTO many VALUES (%s, %s)", rows)
    with _pg(ONE_DB) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE many (id integer, k integer)")
        cur.executemany("INSERT INTO many VALUES (%s, %s)", rows)


def test_a_leg_of_many_rows_but_few_keys_gives_them(fed_app, fquery, many, monkeypatch):
    # orders: 60 rows (more than the limit of 10) but 8 distinct customer ids.
    monkeypatch.setitem(fed_app.config, "FEDERATION_DYNAMIC_KEYS", 10)
    filters = _same(fed_app, fquery, "SELECT o.id, m.id FROM {O} o JOIN {M} m "
                                     "ON m.k = o.customer_id")
    assert filters == [[], ["`m`.`k` IN 8 keys of leg_0"]], filters


def test_a_filter_that_kept_most_rows_is_not_waited_for_again(fed_app, fquery, many,
                                                               text_tables):
    # names.n runs 0..53: every k of many (0..19) is among them, the filter keeps all
    # (the runs before may have taught the sizes already: the order of events is checked).
    split = "SELECT m.id, x.name FROM maria.many m JOIN pg.names x ON x.n = m.k"
    want = fquery("SELECT m.id, x.name FROM one.many m JOIN one.names x ON x.n = m.k")
    seen = []
    for _ in range(4):
        rows, filters = _run(fed_app, split)
        assert sorted(rows) == sorted(want["data"]) and len(rows) == 400
        seen.append(filters[0])
    filtered = seen.index(["`m`.`k` IN 54 keys of leg_1"])
    assert seen[filtered + 1:] == [[]] * (3 - filtered), seen
    assert "filtered" not in fquery("EXPLAIN " + split)["data"][0][0]


@pytest.fixture(scope="module")
def typed_keys(fed_sources):
    """pg.events (120 rows) and maria.days (4 rows) share keys of three kinds: a date, an
    exact decimal and a timestamp; the same two tables in the one database."""
    events = [(i, f"2024-01-{1 + i % 28:02d}", f"{i % 9}.{i % 4 * 25:02d}",
               f"2024-02-0{1 + i % 5} 10:{i % 3:02d}:00") for i in range(120)]
    days = [(1, "2024-01-03", "2.50", "2024-02-02 10:01:00", "a"),
            (2, "2024-01-17", "7.75", "2024-02-05 10:00:00", "b"),
            (3, "2024-01-17", "0.00", "2024-02-03 10:02:00", "c"),
            (4, "1999-12-31", "9.99", "1999-12-31 23:59:59", "d")]
    for database, whole in ((SPLIT_DB, False), (ONE_DB, True)):
        with _pg(database) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE events (id integer, day date, price numeric(6,2), "
                        "at timestamp)")
            cur.executemany("INSERT INTO events VALUES (%s, %s, %s, %s)", events)
            if whole:
                cur.execute("CREATE TABLE days (id integer, day date, price numeric(6,2), "
                            "at timestamp, label text)")
                cur.executemany("INSERT INTO days VALUES (%s, %s, %s, %s, %s)", days)
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE days (id INT, day DATE, price DECIMAL(6,2), at DATETIME, "
                    "label VARCHAR(4))")
        cur.executemany("INSERT INTO days VALUES (%s, %s, %s, %s, %s)", days)


@pytest.mark.parametrize("column, keys", [("day", 3), ("price", 4), ("at", 4)])
def test_date_decimal_and_timestamp_keys_cut_the_larger_leg_from_the_first_run(
        fed_app, fquery, typed_keys, column, keys):
    """The first run of a shape this process never ran is planned from the sources'
    estimates: the small MariaDB leg's keys cut the PostgreSQL leg at once."""
    sql = (f"SELECT e.id, d.label FROM {{E}} e JOIN {{D}} d ON e.{column} = d.{column} "
           "ORDER BY e.id, d.label")
    want = fquery(sql.format(E="one.events", D="one.days"))
    assert want["type"] == "table" and want["data"], want
    rows, filters = _run(fed_app, sql.format(E="pg.events", D="maria.days"))
    assert rows == want["data"]
    assert filters[0] == [f'"e"."{column}" IN {keys} keys of leg_1'], filters


def test_explain_shows_each_legs_estimate_from_its_source(fed_app, fquery, typed_keys):
    steps = fquery("EXPLAIN SELECT e.id, d.label FROM pg.events e JOIN maria.days d "
                   "ON e.day = d.day WHERE d.label > 'a' AND e.id < 60")["data"]
    assert "rows by pg" in steps[0][0] or "rows when last run" in steps[0][0], steps
    assert "rows by maria" in steps[1][0] or "rows when last run" in steps[1][0], steps
    assert "filtered by keys of leg_1" in steps[0][0], steps


@pytest.fixture(scope="module")
def visits(fed_sources):
    """lite.visits (300 rows, declared INTEGER and TEXT columns) and one.visits."""
    rows = [(i, i % 9, f"c{i % 9}") for i in range(300)]
    path = fed_sources["lite"].removeprefix("sqlite:///")
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("CREATE TABLE visits (id INTEGER, customer_id INTEGER, code TEXT)")
        lite.executemany("INSERT INTO visits VALUES (?, ?, ?)", rows)
        lite.commit()
    with _pg(ONE_DB) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE visits (id integer, customer_id integer, code text)")
        cur.executemany("INSERT INTO visits VALUES (%s, %s, %s)", rows)
    yield
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute("DROP TABLE visits")


def test_a_sqlite_leg_is_cut_by_integer_and_text_keys(fed_app, fquery, visits,
                                                     text_tables):
    # Customers of FR are ids 1 and 3: 67 visits of 300.
    sql = ("SELECT v.id, c.name FROM {V} v JOIN {C} c ON v.customer_id = c.id "
           "WHERE c.country = 'FR' ORDER BY v.id")
    want = fquery(sql.format(V="one.visits", C="one.customers"))
    assert want["type"] == "table" and len(want["data"]) == 67, want
    rows, filters = _run(fed_app, sql.format(V="lite.visits", C="maria.customers"))
    assert rows == want["data"]
    assert filters[0] == ['"v"."customer_id" IN 2 keys of leg_1'], filters
    # Text: labels with n < 3 are three words of WORDS, none of them a visit's code.
    sql = "SELECT v.id, x.n FROM {V} v JOIN {N} x ON v.code = x.name WHERE x.n < 3"
    rows, filters = _run(fed_app, sql.format(V="lite.visits", N="maria.labels"))
    assert rows == fquery(sql.format(V="one.visits", N="one.labels"))["data"] == []
    assert filters[0] == ['"v"."code" IN 3 keys of leg_1'], filters
