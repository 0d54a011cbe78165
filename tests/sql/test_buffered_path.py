"""A buffered answer runs as the database runs the statement fastest, with its guarantees.

PostgreSQL: a plain statement bounded by LIMIT cap + 1 (not a server-side cursor, which
PostgreSQL plans for its first rows and never runs in parallel); a stream keeps its cursor,
planned for all its rows.
"""

from __future__ import annotations

import pytest

from app.sql.errors import ErrorCode

from .conftest import RO_ROLE, SRC_DB, _pg_admin
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

