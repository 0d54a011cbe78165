"""Federated SELECT (issue 21): each kind of statement over PostgreSQL, MariaDB and SQLite
gives the answer the same statement gives with all the tables in one PostgreSQL database.

``pg.orders``, ``maria.customers`` and ``lite.targets`` hold the same rows as
``one.orders``, ``one.customers`` and ``one.targets`` (conftest.py).
"""

from __future__ import annotations

import json
import math
import re
import shutil
import threading
import time

import pyarrow as pa
import pytest

from app.sql.errors import ErrorCode

from ..helpers import root_and_bob
from .conftest import ORDERS, SPLIT_DB, _pg

SPLIT = {"O": "pg.orders", "C": "maria.customers", "T": "lite.targets"}
SINGLE = {"O": "one.orders", "C": "one.customers", "T": "one.targets"}


def _both(template: str) -> tuple[str, str]:
    """The statement over the three sources, and over the one database ({O}, {C}, {T})."""
    return template.format(**SPLIT), template.format(**SINGLE)


def _norm(value):
    if isinstance(value, float):
        return round(value, 9) if math.isfinite(value) else value
    return value


def _rows(body: dict, ordered: bool) -> list:
    assert body["type"] == "table", body
    rows = [tuple(_norm(v) for v in row) for row in body["data"]]
    return rows if ordered else sorted(rows, key=repr)


STATEMENTS = {
    "inner join, filters on both sides": (
        "SELECT o.id, o.amount, c.name FROM {O} o JOIN {C} c ON o.customer_id = c.id "
        "WHERE o.amount > 300 AND c.country IN ('FR', 'SE') ORDER BY o.id"),
    "left join keeps customers without orders": (
        "SELECT c.id AS cid, o.id AS oid FROM {C} c LEFT JOIN {O} o "
        "ON o.customer_id = c.id AND o.paid ORDER BY c.id, o.id"),
    "left join, WHERE on the null side is not pushed": (
        "SELECT c.id AS cid FROM {C} c LEFT JOIN {O} o ON o.customer_id = c.id AND o.amount > 950 "
        "WHERE o.id IS NULL ORDER BY 1"),
    "right join": (
        "SELECT t.country AS tc, c.name AS name FROM {C} c RIGHT JOIN {T} t "
        "ON t.country = c.country ORDER BY 1, 2"),
    "full join": (
        "SELECT c.country AS cc, t.country AS tc, t.goal AS goal FROM {C} c FULL JOIN {T} t "
        "ON t.country = c.country ORDER BY 1 NULLS FIRST, 2 NULLS FIRST"),
    "cross join": (
        "SELECT c.id AS cid, t.country AS tc FROM {C} c CROSS JOIN {T} t "
        "WHERE c.score > 4 ORDER BY 1, 2"),
    "three sources": (
        "SELECT c.country AS country, sum(o.amount) AS total, count(*) AS n, "
        "max(t.goal) AS goal FROM {O} o JOIN {C} c ON o.customer_id = c.id "
        "JOIN {T} t ON t.country = c.country GROUP BY c.country ORDER BY 1"),
    "subquery in FROM": (
        "SELECT s.customer_id AS cust, s.total AS total, c.name AS name FROM "
        "(SELECT customer_id, sum(amount) AS total FROM {O} GROUP BY customer_id) s "
        "JOIN {C} c ON c.id = s.customer_id ORDER BY 1"),
    "IN subquery": (
        "SELECT o.id AS id FROM {O} o WHERE o.customer_id IN "
        "(SELECT id FROM {C} WHERE country = 'FR') ORDER BY 1"),
    "NOT IN subquery": (
        "SELECT c.name AS name FROM {C} c WHERE c.country NOT IN "
        "(SELECT country FROM {T}) ORDER BY 1"),
    "correlated EXISTS": (
        "SELECT c.name AS name FROM {C} c WHERE EXISTS "
        "(SELECT 1 FROM {O} o WHERE o.customer_id = c.id AND o.amount > 900) ORDER BY 1"),
    "correlated NOT EXISTS": (
        "SELECT t.country AS country FROM {T} t WHERE NOT EXISTS "
        "(SELECT 1 FROM {C} c WHERE c.country = t.country) ORDER BY 1"),
    "scalar subquery": (
        "SELECT c.name AS name, (SELECT max(o.amount) FROM {O} o "
        "WHERE o.customer_id = c.id) AS biggest FROM {C} c ORDER BY 1"),
    "UNION": "SELECT country AS x FROM {C} UNION SELECT country FROM {T} ORDER BY 1",
    "UNION ALL": (
        "SELECT country AS x FROM {C} UNION ALL SELECT country FROM {T} ORDER BY 1"),
    "INTERSECT": "SELECT country AS x FROM {C} INTERSECT SELECT country FROM {T} ORDER BY 1",
    "EXCEPT": "SELECT country AS x FROM {T} EXCEPT SELECT country FROM {C} ORDER BY 1",
    "CTE": (
        "WITH big AS (SELECT customer_id, sum(amount) AS total FROM {O} GROUP BY "
        "customer_id HAVING sum(amount) > 2000), fr AS (SELECT id, name FROM {C} "
        "WHERE country <> 'RU') SELECT fr.name AS name, big.total AS total FROM big "
        "JOIN fr ON fr.id = big.customer_id ORDER BY 1"),
    "GROUP BY, HAVING, DISTINCT aggregates": (
        "SELECT c.country AS country, count(DISTINCT o.customer_id) AS buyers, "
        "sum(o.amount) AS total, avg(o.qty) AS mean_qty, min(o.placed) AS first "
        "FROM {O} o JOIN {C} c ON o.customer_id = c.id GROUP BY c.country "
        "HAVING count(*) > 5 ORDER BY 1"),
    "DISTINCT": (
        "SELECT DISTINCT c.country AS country, o.paid AS paid FROM {O} o "
        "JOIN {C} c ON o.customer_id = c.id ORDER BY 1, 2"),
    "window functions": (
        "SELECT o.id AS id, c.country AS country, row_number() OVER (PARTITION BY "
        "c.country ORDER BY o.amount DESC, o.id) AS rank_in_country, sum(o.amount) OVER "
        "(PARTITION BY c.country) AS country_total FROM {O} o JOIN {C} c "
        "ON o.customer_id = c.id ORDER BY 1"),
    "ORDER BY, LIMIT, OFFSET": (
        "SELECT o.id AS id, c.name AS name FROM {O} o JOIN {C} c ON o.customer_id = c.id "
        "ORDER BY o.amount DESC, o.id LIMIT 7 OFFSET 3"),
    "CASE, casts, scalar functions": (
        "SELECT o.id AS id, CASE WHEN o.amount > 500 THEN 'big' ELSE 'small' END AS size, "
        "CAST(o.qty AS varchar) AS qty_text, upper(c.name) AS loud, length(c.name) AS len, "
        "coalesce(o.note, '-') AS note, round(o.amount * 3, 1) AS r, "
        "EXTRACT(YEAR FROM c.joined) AS y, lower(t.country) || '!' AS tc "
        "FROM {O} o JOIN {C} c ON o.customer_id = c.id LEFT JOIN {T} t "
        "ON t.country = c.country ORDER BY 1"),
    "every type, NULLs included": (
        "SELECT o.id AS id, o.customer_id AS cust, o.amount AS amount, o.qty AS qty, "
        "o.rate AS rate, o.paid AS paid, o.placed AS placed, o.placed_tz AS placed_tz, "
        "o.note AS note, c.name AS name, c.joined AS joined, c.score AS score, "
        "t.ratio AS ratio FROM {O} o LEFT JOIN {C} c ON o.customer_id = c.id "
        "LEFT JOIN {T} t ON t.country = c.country ORDER BY 1"),
    "a join inside one source runs in that source": (
        "SELECT a.id AS a, b.id AS b, c.name AS name FROM {O} a JOIN {O} b "
        "ON a.customer_id = b.customer_id AND b.amount > 900 JOIN {C} c "
        "ON c.id = a.customer_id WHERE a.amount < 150 ORDER BY 1, 2"),
    "joined in one source through an equality the statement implies": (
        "SELECT a.id AS a, b.id AS b FROM {O} a, {C} c, {O} b WHERE a.customer_id = c.id "
        "AND c.id = b.customer_id AND a.amount > 900 AND b.amount < 100 ORDER BY 1, 2"),
    "exact decimal sum over the whole join": (
        "SELECT sum(o.amount) AS total, sum(o.amount * o.customer_id) AS weighted "
        "FROM {O} o JOIN {C} c ON o.customer_id = c.id"),
}


@pytest.mark.parametrize("template", list(STATEMENTS.values()), ids=list(STATEMENTS))
def test_same_answer_as_one_database(fquery, template):
    split, single = _both(template)
    got, want = fquery(split), fquery(single)
    ordered = "ORDER BY" in template
    assert got.get("type") == "table", got
    assert got["column_names"] == want["column_names"]
    assert _rows(got, ordered) == _rows(want, ordered)
    assert got["data"], "a comparison of two empty answers would prove nothing"


def test_parameters_are_bound_as_values(fquery):
    sql = ("SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c "
           "ON o.customer_id = c.id WHERE c.name = :who AND o.amount > :least ORDER BY o.id")
    body = fquery(sql, params={"who": "Ada", "least": 500})
    want = fquery(sql.replace(":who", "'Ada'").replace(":least", "500"))
    assert body["data"] == want["data"] and body["data"], body
    # A value is a value: quotes in it do not end the string.
    assert fquery(sql, params={"who": "x' OR '1'='1", "least": 0})["data"] == []
    body = fquery(sql, params={"who": "Ada"})
    assert body["type"] == "error" and body["error_code"] == 8 and ":least" in \
        body["error_message"]
    # A row count given as a parameter is held to the same 64-bit bound as a written one.
    limited = sql + " LIMIT :n"
    body = fquery(limited, params={"who": "Ada", "least": 0, "n": 2 ** 70})
    assert body["type"] == "error" and body["error_code"] == ErrorCode.OUT_OF_RANGE, body
    whole = fquery(sql, params={"who": "Ada", "least": 0})["data"]
    assert fquery(limited, params={"who": "Ada", "least": 0, "n": 1})["data"] == whole[:1]


MORE = [  # rows compared (the databases name some of these columns differently)
    "SELECT count(*) AS n FROM {O} o JOIN {C} c USING (id)",
    "SELECT * FROM {T} t JOIN {C} c ON c.country = t.country ORDER BY c.id",
    "SELECT c.name, x.total FROM {C} c, LATERAL (SELECT sum(amount) AS total FROM {O} o "
    "WHERE o.customer_id = c.id) x ORDER BY 1",
    "SELECT DISTINCT ON (c.country) c.country, c.name FROM {C} c JOIN {O} o "
    "ON o.customer_id = c.id ORDER BY c.country, c.name",
    "SELECT o.id, o.placed_tz FROM {O} o JOIN {C} c ON c.id = o.customer_id "
    "WHERE o.placed_tz > '2024-05-01' ORDER BY 1",
    "SELECT t.country, t.goal FROM {T} t WHERE t.goal > (SELECT avg(score) FROM {C}) "
    "ORDER BY 1",
]


@pytest.mark.parametrize("template", MORE)
def test_same_rows_as_one_database(fquery, template):
    split, single = _both(template)
    got = fquery(split)
    assert got["type"] == "table", got
    assert got["data"] == fquery(single)["data"] and got["data"]


def test_decimal_sums_stay_exact(fed_app):
    # Through the raw JSON text: 0.1-style float noise would show as extra digits.
    client = fed_app.test_client()
    body = client.post("/api/sql/query", json={"query": _both(
        "SELECT sum(o.amount) AS total FROM {O} o JOIN {C} c ON o.customer_id = c.id")[0]})
    cents = sum(int(a.replace(".", "")) for _, c, a, *_ in ORDERS if 1 <= c <= 6)
    assert re.search(rf'\[\[{cents // 100}\.{cents % 100:02d}\]\]', body.get_data(as_text=True))


def test_unaliased_expressions_and_stars_are_named(fquery):
    body = fquery("SELECT count(*), c.* FROM pg.orders o JOIN maria.customers c "
                  "ON o.customer_id = c.id GROUP BY ALL ORDER BY c.id LIMIT 1")
    assert body["column_names"][1:] == ["id", "name", "country", "joined", "score"]
    body = fquery("SELECT count(*), max(c.id) FROM pg.orders o JOIN maria.customers c "
                  "ON o.customer_id = c.id")
    assert body["column_names"] == ["COUNT(*)", "MAX(c.id)"]


def _explain(fquery, sql: str) -> dict[str, str]:
    body = fquery("EXPLAIN " + sql)
    assert body["column_names"] == ["step", "source", "sql"], body
    return {row[1]: row[2] for row in body["data"]}


def test_explain_shows_each_leg_with_its_pushed_filter_and_columns(fquery):
    steps = _explain(fquery, "SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c "
                             "ON o.customer_id = c.id WHERE o.amount > 990 AND "
                             "c.country = 'FR' AND o.id + c.id > 3")
    assert re.search(r"WHERE o\.amount > 990$", steps["pg"]), steps
    assert "note" not in steps["pg"] and '"customer_id"' in steps["pg"]  # needed columns
    assert "WHERE c.country = 'FR'" in steps["maria"] and "`name`" in steps["maria"]
    assert "o.id + c.id > 3" in steps["duckdb"]  # touches two sources: the engine's
    # The pushed filter really cuts what the leg reads: 2 of the 60 orders qualify.
    body = fquery("SELECT o.id FROM pg.orders o JOIN maria.customers c "
                  "ON o.customer_id = c.id WHERE o.amount > 990")
    assert sorted(body["data"]) == [[27], [54]]


def test_a_filter_its_source_settles_exactly_leaves_the_engine_and_its_column_stays_home(
        fquery):
    """An integer, decimal or date column compared with plain literals of its kind keeps
    the same rows in PostgreSQL, MariaDB and the engine: the engine does not check it
    again, and a column only such a condition reads is not sent. A condition on text (the
    source's collation decides), on a timestamp, or on a SQLite leg is checked by the
    engine as well, its column sent."""
    steps = _explain(fquery, "SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c "
                             "ON o.customer_id = c.id WHERE o.amount >= 10.25 "
                             "AND o.qty BETWEEN -5 AND 10000000040 "
                             "AND c.joined < DATE '2024-02-29' AND c.score <> 3")
    assert "o.amount >= 10.25" in steps["pg"] and "amount" not in steps["duckdb"], steps
    assert '"amount"' not in steps["pg"].split(" FROM ")[0], steps  # not sent
    assert '"qty"' not in steps["pg"].split(" FROM ")[0] and "qty" not in steps["duckdb"]
    assert "joined" not in steps["duckdb"] and "score" not in steps["duckdb"], steps
    kept = _explain(fquery, "SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c "
                            "ON o.customer_id = c.id JOIN lite.targets t "
                            "ON t.country = c.country WHERE c.country = 'FR' "
                            "AND o.placed > '2024-03-01' AND t.goal > 100 "
                            "AND o.rate > 0.5 AND c.joined > '2024-02-30'")
    for condition in ("c.country = 'FR'", "o.placed > '2024-03-01'", "t.goal > 100",
                      "o.rate > 0.5", "c.joined > '2024-02-30'"):
        assert condition in kept["duckdb"], (condition, kept)


SETTLED = [  # each condition at its boundary, kept by the source alone
    "o.amount >= 10.25", "o.amount > 990", "o.amount <= 37.13", "o.qty <> 10000000007",
    "o.customer_id BETWEEN 2 AND 4", "o.id > -1", "c.joined < DATE '2024-02-29'",
    "c.joined >= '2023-03-11'", "c.score = 3", "c.joined BETWEEN '2023-01-05' AND '2024-02-29'",
]


@pytest.mark.parametrize("condition", SETTLED)
def test_a_settled_filter_keeps_the_rows_of_one_database(fquery, condition):
    split, single = _both("SELECT o.id, o.amount, c.name FROM {O} o JOIN {C} c "
                          "ON o.customer_id = c.id WHERE " + condition + " ORDER BY o.id")
    got, want = fquery(split), fquery(single)
    assert _rows(got, True) == _rows(want, True) and got["data"], (got, want)
    assert " WHERE " not in _explain(fquery, split)["duckdb"]  # the only condition: settled


def test_explain_keeps_outer_join_filters_in_the_engine_and_pushes_a_safe_limit(fquery):
    steps = _explain(fquery, "SELECT c.id FROM maria.customers c LEFT JOIN pg.orders o "
                             "ON o.customer_id = c.id AND o.paid WHERE o.id IS NULL")
    assert "WHERE o.paid" in steps["pg"] and "IS NULL" not in steps["pg"], steps
    steps = _explain(fquery, "SELECT s.id, c.name FROM (SELECT id, customer_id FROM "
                             "pg.orders WHERE qty > 5 LIMIT 4) s JOIN maria.customers c "
                             "ON c.id = s.customer_id")
    assert steps["pg"].endswith("LIMIT 4"), steps


def test_explain_shows_a_join_inside_one_source_sent_to_it(fquery):
    steps = _explain(fquery, "SELECT a.id, b.id, c.name FROM pg.orders a JOIN pg.orders b "
                             "ON a.customer_id = b.customer_id AND b.amount > 900 "
                             "JOIN maria.customers c ON c.id = a.customer_id")
    assert re.fullmatch(r'SELECT .* FROM orders AS "a" CROSS JOIN orders AS "b" WHERE '
                        r"a\.customer_id = b\.customer_id AND b\.amount > 900", steps["pg"]), \
        steps
    assert "a__id" in steps["pg"] and "b__id" in steps["pg"]


def test_explain_joins_tables_of_one_source_through_an_implied_equality(fquery):
    steps = _explain(fquery, "SELECT a.id, b.id FROM pg.orders a, maria.customers c, "
                             "pg.orders b WHERE a.customer_id = c.id "
                             "AND c.id = b.customer_id")
    assert 'FROM orders AS "a" CROSS JOIN orders AS "b" WHERE a.customer_id = ' \
        "b.customer_id" in steps["pg"], steps


def test_a_single_source_statement_keeps_its_own_path(fquery):
    body = fquery("EXPLAIN SELECT id FROM pg.orders WHERE amount > 10")
    assert body["column_names"] == ["QUERY PLAN"], body  # PostgreSQL's own plan
    assert fquery("SELECT count(*) AS n FROM pg.orders")["data"] == [[len(ORDERS)]]


def _orders_count() -> int:
    with _pg(SPLIT_DB) as conn:
        return conn.execute("SELECT count(*) FROM orders").fetchone()[0]


@pytest.mark.parametrize("sql", [
    "DELETE FROM pg.orders WHERE customer_id IN (SELECT id FROM maria.customers)",
    "WITH gone AS (DELETE FROM pg.orders RETURNING customer_id) SELECT c.name FROM gone "
    "JOIN maria.customers c ON c.id = gone.customer_id",
    "SELECT o.id INTO pg.copy FROM pg.orders o JOIN maria.customers c ON c.id = o.id",
    "SELECT o.id FROM pg.orders o JOIN maria.customers c ON c.id = o.id FOR UPDATE",
])
def test_a_write_anywhere_is_refused_before_any_leg_runs(fquery, sql):
    before = _orders_count()
    body = fquery(sql)
    assert body["type"] == "error" and body["error_code"] == 3, body  # READ_ONLY
    assert _orders_count() == before


@pytest.mark.parametrize("sql, words", [
    ("SELECT * FROM pg.nosuch n JOIN maria.customers c ON c.id = n.id", ["pg", "nosuch"]),
    ("SELECT * FROM pg.orders o JOIN maria.nosuch n ON n.id = o.id", ["maria", "nosuch"]),
    ("SELECT * FROM pg.orders o JOIN lite.nosuch n ON n.id = o.id", ["lite", "nosuch"]),
    ("SELECT o.nosuch FROM pg.orders o JOIN maria.customers c ON c.id = o.customer_id",
     ["nosuch", "pg.orders"]),
    ("SELECT * FROM pg.orders o JOIN elsewhere.customers c ON c.id = o.id", ["elsewhere"]),
])
def test_a_missing_table_column_or_source_is_named(fquery, sql, words):
    body = fquery(sql)
    assert body["type"] == "error", body
    for word in words:
        assert word in body["error_message"], body


def test_an_engine_error_is_an_error_not_a_500(fquery):
    body = fquery("SELECT CAST(c.name AS integer) AS n FROM pg.orders o "
                  "JOIN maria.customers c ON c.id = o.customer_id")
    assert body["type"] == "error" and body["error_code"] == 15, body
    assert "federation engine" in body["error_message"]


def test_the_engine_reads_nothing_but_the_legs(fquery):
    body = fquery("SELECT * FROM read_csv('/etc/passwd') p JOIN pg.orders o ON true")
    assert body["type"] == "error", body
    body = fquery("WITH x AS (SELECT 1 AS a FROM pg.orders) SELECT * FROM x, "
                  "maria.customers c, duckdb_settings()")
    assert body["type"] == "error", body


def test_caps_truncate_and_a_too_large_leg_is_an_error(fed_app, fquery, monkeypatch):
    sql = "SELECT o.id FROM pg.orders o JOIN maria.customers c ON c.id = o.customer_id"
    monkeypatch.setitem(fed_app.config, "SQL_MAX_ROWS", 5)
    body = fquery(sql)
    assert len(body["data"]) == 5 and body.get("truncated") is True
    monkeypatch.setitem(fed_app.config, "SQL_MAX_ROWS", 100_000)
    monkeypatch.setitem(fed_app.config, "FEDERATION_MAX_LEG_ROWS", 10)
    body = fquery(sql)
    assert body["type"] == "error" and body["error_code"] == 12, body  # TOO_MANY_ROWS
    assert "pg.orders" in body["error_message"]
    assert fquery(sql + " WHERE o.id <= 10")["type"] == "table"  # 10 rows: within


def test_a_source_that_is_down_is_named(fed_sources, make_app):
    sources = dict(fed_sources, gone="postgresql+psycopg://postgres@127.0.0.1:1/nosuch")
    app = make_app(DATA_SOURCES=sources)
    body = app.test_client().post("/api/sql/query", json={
        "query": "SELECT * FROM gone.t g JOIN maria.customers c ON c.id = g.id"}).get_json()
    assert body["type"] == "error" and body["error_code"] == 10, body  # SOURCE_DOWN
    assert "'gone'" in body["error_message"]


def test_time_limit_covers_the_engine(fquery):
    started = time.monotonic()
    body = fquery("WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r "
                  "WHERE n < 1000000000) SELECT count(*) FROM r, pg.orders o, "
                  "maria.customers c WHERE o.id = 1 AND c.id = 1", timeout_s=1.0)
    assert body["type"] == "error" and body["error_code"] == 9, body  # TIME_LIMIT
    assert time.monotonic() - started < 5


@pytest.fixture(scope="module")
def slow_view(fed_sources):
    """A PostgreSQL view that takes about 20 s to read (it sleeps in every row)."""
    with _pg(SPLIT_DB) as conn:
        # pg_sleep in the one column the leg reads: no plan can skip it.
        conn.execute("CREATE VIEW slow AS SELECT g + length(pg_sleep(0.1)::text) AS id "
                     "FROM generate_series(1, 200) g")
    yield "pg.slow"


def test_cancel_stops_the_leg_in_its_database_and_the_list_shows_it_once(fed_app,
                                                                          slow_view):
    client = fed_app.test_client()
    sql = f"SELECT s.id FROM {slow_view} s JOIN maria.customers c ON c.id = s.id"
    answer: dict = {}
    thread = threading.Thread(target=lambda: answer.update(client.post(
        "/api/sql/query", json={"query": sql}).get_json()))
    thread.start()
    listed = []
    deadline = time.monotonic() + 10
    while not listed and time.monotonic() < deadline:
        time.sleep(0.2)
        listed = [q for q in fed_app.test_client().get("/api/sql/queries").get_json()
                  if q["statement"] == sql]
    assert len(listed) == 1, listed  # once, with its legs
    query_id = listed[0]["query_id"]
    assert listed[0]["source"] == "pg, maria"
    legs = listed[0]["legs"]
    assert [leg["source"] for leg in legs] == ["pg", "maria"]
    # The slow leg's one batch has not come yet; the list says so.
    assert legs[0]["sql"].startswith('SELECT "s"."id" FROM slow') and legs[0]["rows"] == 0
    asked = time.monotonic()
    assert fed_app.test_client().delete(f"/api/sql/queries/{query_id}").status_code in (
        200, 202, 204)
    thread.join(10)
    assert not thread.is_alive()
    assert answer["type"] == "error" and answer["error_code"] == 22, answer  # CANCELLED
    assert time.monotonic() - asked < 2
    with _pg(SPLIT_DB) as conn:
        running = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                               "%s AND pid <> pg_backend_pid()", (f"%{query_id}%",))
        assert running.fetchone()[0] == 0


def test_a_statement_over_sources_of_long_names_is_listed_while_it_runs(make_app, pg_store,
                                                                       fed_sources, slow_view):
    """The store keeps 63 characters of a statement's sources: two of 60 are listed cut
    there (PostgreSQL refused the whole row before: the statement was never listed), and
    its legs name each whole."""
    names = ["pg_" + "p" * 57, "maria_" + "m" * 54]
    app = make_app(DATABASE_URL=pg_store,
                   DATA_SOURCES={names[0]: fed_sources["pg"], names[1]: fed_sources["maria"]})
    sql = f"SELECT s.id FROM {names[0]}.slow s JOIN {names[1]}.customers c ON c.id = s.id"
    thread = threading.Thread(target=lambda: app.test_client().post(
        "/api/sql/query", json={"query": sql}))
    thread.start()
    listed: list = []
    deadline = time.monotonic() + 15
    while not (listed and listed[0].get("legs")) and time.monotonic() < deadline:
        time.sleep(0.2)
        listed = [q for q in app.test_client().get("/api/sql/queries").get_json()
                  if q["statement"] == sql]
    try:
        assert len(listed) == 1, listed
        assert listed[0]["source"] == f"{names[0]}, {names[1]}"[:63]
        assert [leg["source"] for leg in listed[0]["legs"]] == names
    finally:
        for item in listed:
            app.test_client().delete(f"/api/sql/queries/{item['query_id']}")
        thread.join(15)
    assert not thread.is_alive()


def test_a_failing_leg_stops_the_legs_running_beside_it(fed_app, fquery, slow_view,
                                                         monkeypatch):
    # Legs run in parallel: customers (6 rows) breaks the leg limit at once, while the
    # slow view would take 20 s; the answer is the first failure, and the slow leg is
    # stopped in PostgreSQL.
    monkeypatch.setitem(fed_app.config, "FEDERATION_MAX_LEG_ROWS", 3)
    started = time.monotonic()
    body = fquery(f"SELECT s.id FROM {slow_view} s JOIN maria.customers c ON c.id = s.id")
    assert body["type"] == "error" and body["error_code"] == 12, body
    assert "maria.customers" in body["error_message"]
    assert time.monotonic() - started < 5
    with _pg(SPLIT_DB) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE "
                            "'%%FROM slow%%' AND state = 'active' "
                            "AND pid <> pg_backend_pid()").fetchone()[0]
    assert left == 0


@pytest.fixture
def store_url(request, tmp_path) -> str:
    path = tmp_path / "store.db"
    shutil.copy(request.getfixturevalue("sqlite_template"), path)
    return f"sqlite:///{path}"


def test_every_source_needs_a_grant_and_a_forbidden_one_answers_as_missing(
        fed_sources, make_app):
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY="x" * 32, DEMO_SOURCE=False,
                   DATA_SOURCES=fed_sources)
    sql = root_and_bob(app)
    sql("root", "GRANT query ON DATABASE pg TO bob")
    template = "SELECT o.id FROM pg.orders o JOIN {}.customers c ON c.id = o.customer_id"
    forbidden, missing = sql("bob", template.format("maria")), sql("bob", template.format(
        "nosuch"))
    assert forbidden["type"] == "error" and forbidden["error_code"] == 5, forbidden
    assert forbidden["error_message"].replace("maria", "X") == \
        missing["error_message"].replace("nosuch", "X")
    assert sql("root", "GRANT query ON DATABASE maria TO bob")["type"] == "ok"
    assert sql("bob", template.format("maria"))["type"] == "table"


STREAMED = ("SELECT o.id AS id, o.amount AS amount, c.name AS name, o.placed AS placed "
            "FROM pg.orders o JOIN maria.customers c ON o.customer_id = c.id ORDER BY o.id")


def _post(app, sql: str, fmt: str):
    return app.test_client().post("/api/sql/query", json={"query": sql,
                                                           "response_format": fmt})


def test_a_federated_statement_streams_as_jsonlines_and_sse(fed_app, fquery):
    want = fquery(STREAMED)
    response = _post(fed_app, STREAMED, "jsonlines")
    assert response.status_code == 200 and response.mimetype == "application/jsonlines"
    header, *batches, end = [json.loads(line) for line in
                             response.get_data(as_text=True).splitlines()]
    assert header["column_names"] == want["column_names"]
    assert header["query_id"] == response.headers["X-Query-Id"]
    assert [row for batch in batches for row in batch] == want["data"]
    assert end == {"type": "end", "row_count": len(want["data"])}
    text = _post(fed_app, STREAMED, "sse").get_data(as_text=True)
    assert text.startswith("data: ") and '"type":"end"' in text.replace(" ", "")


def test_a_federated_statement_streams_as_csv_and_arrow(fed_app, fquery):
    want = fquery(STREAMED)["data"]
    lines = _post(fed_app, STREAMED, "csv").get_data(as_text=True).splitlines()
    assert lines[0] == "id,amount,name,placed"
    assert [line.split(",")[0] for line in lines[1:]] == [str(r[0]) for r in want]
    assert lines[1].split(",")[2] == want[0][2]
    table = pa.ipc.open_stream(_post(fed_app, STREAMED, "arrow").get_data()).read_all()
    assert table.column_names == ["id", "amount", "name", "placed"]
    assert table.column("id").to_pylist() == [r[0] for r in want]
    assert table.column("name").to_pylist() == [r[2] for r in want]


def test_a_streamed_federated_statement_keeps_the_stream_row_limit(fed_app, monkeypatch):
    monkeypatch.setitem(fed_app.config, "SQL_STREAM_MAX_ROWS", 7)
    lines = _post(fed_app, STREAMED, "jsonlines").get_data(as_text=True).splitlines()
    assert json.loads(lines[-1]) == {"type": "end", "row_count": 7, "truncated": True}
    # An error before the first row is a plain error answer, as for one source.
    response = _post(fed_app, "SELECT o.id FROM pg.orders o JOIN maria.nosuch n "
                              "ON n.id = o.id", "jsonlines")
    assert "nosuch" in response.get_data(as_text=True)


def test_a_model_joins_the_rows_of_a_subquery_over_several_sources(fquery):
    trained = fquery("CREATE MODEL mindsdb.fed_amount FROM pg (SELECT qty, rate, amount "
                     "FROM orders) PREDICT amount USING join_learn_process = true, "
                     "time_budget_s = 1")
    assert trained["type"] != "error", trained
    body = fquery("SELECT t.id, m.amount FROM (SELECT o.id, o.qty, o.rate FROM pg.orders o "
                  "JOIN maria.customers c ON c.id = o.customer_id WHERE c.country = 'FR') "
                  "AS t JOIN mindsdb.fed_amount AS m")
    assert body["type"] == "table", body
    want = fquery("SELECT o.id FROM one.orders o JOIN one.customers c "
                  "ON c.id = o.customer_id WHERE c.country = 'FR'")["data"]
    assert sorted(row[0] for row in body["data"]) == sorted(row[0] for row in want)
    assert all(isinstance(row[1], int | float) for row in body["data"])
