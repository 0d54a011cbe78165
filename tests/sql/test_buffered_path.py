"""A buffered answer runs as the database runs the statement fastest, with its guarantees.

PostgreSQL: a plain statement bounded by LIMIT cap + 1 (not a server-side cursor, which
PostgreSQL plans for its first rows and never runs in parallel); a stream keeps its cursor,
planned for all its rows. SQLite: the statement keeps the join order freedom of its text.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time

import pytest

from app.sql.errors import ErrorCode
from app.sql.gate import gate
from app.sql.sources import current_sources

from .conftest import RO_ROLE, SRC_DB, _pg_admin, mysql_connect
from .test_streaming import jsonl, post  # noqa: F401 - the fixture


def test_a_buffered_postgresql_statement_runs_outside_any_cursor(query):
    # The statement reading pg_cursors would be listed there if it ran in one.
    assert query("SELECT count(*) FROM pg_cursors WHERE name LIKE 'quarry%'",
                 db="pg")["data"] == [[0]]


def test_a_postgresql_stream_keeps_its_cursor_planned_for_every_row(post):  # noqa: F811
    response = post("SELECT (SELECT count(*) FROM pg_cursors WHERE name LIKE 'quarry%'), "
                    "setting FROM pg_settings WHERE name = 'cursor_tuple_fraction'",
                    "jsonlines", "pg")
    header, rows, end = jsonl(response)
    assert rows == [[1, "1"]], rows


@pytest.fixture
def capped(make_app, sources):
    """A client of an app whose sources answer at most 100 rows (``big`` has 250)."""
    client = make_app(DATA_SOURCES={name: {"url": url, "max_rows": 100}
                                    for name, url in sources.items()}).test_client()

    def run(sql: str, db: str, **extra) -> dict:
        return client.post("/api/sql/query", json={"query": sql, "context": {"db": db},
                                                   **extra}).get_json()

    return run


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_the_row_cap_is_right_whatever_the_statement_ends_with(capped, db):
    # Its own LIMIT above the cap, in the order it asks for.
    body = capped("SELECT n FROM big ORDER BY n DESC LIMIT 150", db)
    assert body["truncated"] is True and len(body["data"]) == 100
    assert body["data"][0] == [250] and body["data"][-1] == [151]
    # A UNION sorted as a whole.
    body = capped("SELECT n FROM big WHERE n <= 60 UNION ALL "
                  "SELECT n FROM big WHERE n > 200 ORDER BY n", db)
    assert body["truncated"] is True and len(body["data"]) == 100
    assert body["data"][59:61] == [[60], [201]] and body["data"][-1] == [240]
    # OFFSET near the end: fewer rows than the cap, not truncated.
    body = capped("SELECT n FROM big ORDER BY n LIMIT 10 OFFSET 245", db)
    assert body["data"] == [[246], [247], [248], [249], [250]] and "truncated" not in body
    # A LIMIT given as a parameter, one above the cap.
    body = capped("SELECT n FROM big ORDER BY n LIMIT :k", db, params={"k": 101})
    assert body["truncated"] is True and body["data"][-1] == [100]


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_columns_of_one_name_and_empty_results_keep_their_names(query, db):
    body = query("SELECT n, n FROM big WHERE n < 3 ORDER BY n", db=db)
    assert body["column_names"] == ["n", "n"] and body["data"] == [[1, 1], [2, 2]]
    body = query("SELECT n AS a, label FROM big WHERE n < 0", db=db)
    assert body["column_names"] == ["a", "label"] and body["data"] == []


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_the_byte_cap_stops_the_statement_and_the_source_stays_clean(make_app, sources, db):
    client = make_app(DATA_SOURCES=sources, SQL_MAX_RESPONSE_BYTES=2000).test_client()

    def run(sql: str) -> dict:
        return client.post("/api/sql/query", json={"query": sql, "context": {"db": db}}
                           ).get_json()

    body = run("SELECT * FROM big")
    assert body["type"] == "error" and body["error_code"] == ErrorCode.RESPONSE_TOO_LARGE
    assert run("SELECT count(*) FROM big")["data"] == [[250]]
    if db == "pg":  # no session of the source left in a transaction or a statement
        with _pg_admin() as conn:
            assert conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename = %s "
                "AND state NOT IN ('idle')", (SRC_DB, RO_ROLE)).fetchone() == (0,)


def test_sqlite_plans_the_statement_it_runs_as_the_users_own_text(sql_app, lite_source):
    conn = sqlite3.connect(f"file:{lite_source['path']}?mode=ro", uri=True)

    def plan(sql: str) -> list[str]:
        return [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]

    # With a comma, SQLite picks the order (items is probed by its key); a CROSS JOIN,
    # which sqlglot reads a comma as, would force items to be the outer loop.
    commas = "SELECT count(*) FROM items, big WHERE items.id = big.y"
    explicit = "SELECT count(*) FROM items CROSS JOIN big WHERE items.id = big.y"
    assert plan(commas) != plan(explicit)
    with sql_app.app_context():
        for sql in (commas, explicit):
            gated = gate(sql, current_sources(), "lite")
            assert plan(gated.sql) == plan(sql), gated.sql
    conn.close()


@pytest.mark.parametrize("db", ["pg", "maria"])
def test_a_connection_the_server_closed_is_replaced_without_an_error(make_app, sources, db):
    # The pool checks an idle connection without a round trip (sources._looks_closed).
    client = make_app(DATA_SOURCES=sources, SQL_POOL_SIZE=1).test_client()

    def run(sql: str) -> dict:
        return client.post("/api/sql/query", json={"query": sql, "context": {"db": db}}
                           ).get_json()

    own = "SELECT pg_backend_pid()" if db == "pg" else "SELECT CONNECTION_ID()"
    first = run(own)
    assert first["type"] == "table", first
    session = first["data"][0][0]
    if db == "pg":
        with _pg_admin() as conn:
            assert conn.execute("SELECT pg_terminate_backend(%s)", (session,)).fetchone() \
                == (True,)
    else:
        with contextlib.closing(mysql_connect()) as conn, conn.cursor() as cursor:
            cursor.execute(f"KILL {int(session)}")
    time.sleep(0.2)  # the server's goodbye reaches the socket
    second = run(own)
    assert second["type"] == "table", second
    assert second["data"][0][0] != session
