"""Plans good from a statement's first run: a leg that reads a whole table gives its keys to
another leg only when the sources' statistics say those keys are fewer than the values the
other leg's column holds (a table and a column referring to its key: the filter would keep
every row, and the larger leg would only wait).

Each statement here is one the process never ran: what EXPLAIN shows comes from the
sources' statistics alone, and the first run is the one checked. A gunicorn worker opens
its connections to the data sources when it starts, before its first statement.
"""

from __future__ import annotations

import contextlib
import json
import socket

import pytest
import requests

from tests.live import quarry_env, serving, sqlite_store

from .conftest import ONE_DB, SPLIT_DB, _mysql, _pg
from .test_dynamic_filter import _run

# fr_refs: 400 rows whose thing_id runs over the 100 ids of fr_things; fr_few: 5 of them.
REFS = [(i, 1 + i % 100) for i in range(400)]
THINGS = [(i, f"thing {i}") for i in range(1, 101)]
FEW = THINGS[:5]


@pytest.fixture(scope="module")
def keyed_tables(fed_sources):
    """pg.fr_refs (analysed), maria.fr_things and maria.fr_few (keyed, analysed), and the
    three in the one database."""
    for database, whole in ((SPLIT_DB, False), (ONE_DB, True)):
        with _pg(database) as conn, conn.cursor() as cur:
            cur.execute("CREATE TABLE fr_refs (id integer PRIMARY KEY, thing_id integer)")
            cur.executemany("INSERT INTO fr_refs VALUES (%s, %s)", REFS)
            cur.execute("ANALYZE fr_refs")
            if whole:
                for table, rows in (("fr_things", THINGS), ("fr_few", FEW)):
                    cur.execute(f"CREATE TABLE {table} (id integer PRIMARY KEY, name text)")
                    cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        for table, rows in (("fr_things", THINGS), ("fr_few", FEW)):
            cur.execute(f"CREATE TABLE {table} (id INT PRIMARY KEY, name VARCHAR(20))")
            cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", rows)
            cur.execute(f"ANALYZE TABLE {table}")
            cur.fetchall()


SQL = "SELECT r.id, t.name FROM {R} r JOIN {T} t ON r.thing_id = t.id ORDER BY r.id"


def _statements(things: str, refs: str = "fr_refs") -> tuple[str, str]:
    return (SQL.format(R=f"pg.{refs}", T=f"maria.{things}"),
            SQL.format(R=f"one.{refs}", T=f"one.{things}"))


# Written without quotes in capitals, PostgreSQL's name is the lower-case one its
# statistics are kept under.
@pytest.mark.parametrize("refs", ["fr_refs", "FR_REFS"])
def test_the_keys_of_a_whole_table_a_column_refers_to_are_not_waited_for(
        fed_app, fquery, keyed_tables, refs):
    split, one = _statements("fr_things", refs)
    steps = fquery("EXPLAIN " + split)["data"]
    # The smaller leg is the 100 things (estimated by MariaDB, or read by the run before),
    # but their 100 ids are every value of fr_refs.thing_id: no leg waits for another.
    assert steps[1][0].split("; ")[1] in ("estimated 100 rows by maria",
                                          "100 rows when last run"), steps
    assert not any("filtered by keys" in step[0] for step in steps), steps
    want = fquery(one)["data"]
    assert len(want) == 400
    assert fquery(split)["data"] == want
    rows, filters = _run(fed_app, split.replace("ORDER BY r.id", "ORDER BY r.id "))
    assert [list(row) for row in rows] == want and filters == [[], []], filters


def test_the_keys_of_a_small_whole_table_still_cut_the_larger_leg(
        fed_app, fquery, keyed_tables):
    split, one = _statements("fr_few")
    steps = fquery("EXPLAIN " + split)["data"]
    assert steps[0][0].endswith('filtered by keys of leg_1 at run time: "r"."thing_id" IN '
                                "(the values of id)"), steps
    want = fquery(one)["data"]
    assert len(want) == 20
    rows, filters = _run(fed_app, split)
    assert [list(row) for row in rows] == want
    assert filters == [['"r"."thing_id" IN 5 keys of leg_1'], []], filters


@pytest.mark.parametrize("below, waits, shape", [(40, False, ""), (15, True, " AND r.id >= 0")])
def test_a_leg_waits_for_keys_only_from_a_leg_a_quarter_its_size(fed_app, fquery,
                                                                 keyed_tables, below, waits,
                                                                 shape):
    # The 100 things (a whole table in MariaDB) against the refs with an id below 40 or 15
    # (PostgreSQL estimates them from its statistics; two shapes, so that neither run
    # learns the other's size): 40 keys would cut the things to 40 rows, which reading
    # them at once, beside the refs, costs less than waiting; 15 keys are worth the wait
    # (dynamic.WAIT_RATIO).
    split = (f"SELECT r.id, t.name FROM pg.fr_refs r JOIN maria.fr_things t ON t.id = r.id "
             f"WHERE r.id < {below}{shape} ORDER BY r.id")
    steps = fquery("EXPLAIN " + split)["data"]
    things = next(step[0] for step in steps if step[1] == "maria")
    assert ("filtered by keys" in things) is waits, steps
    want = fquery(split.replace("pg.", "one.").replace("maria.", "one."))["data"]
    assert len(want) == below - 1
    rows, filters = _run(fed_app, split)
    assert [list(row) for row in rows] == want
    assert bool(filters[1]) is waits, filters


def _idle(conn) -> dict[int, str]:
    """Idle backends of the split database: pid -> last statement. An ADBC session's is
    its ROLLBACK (``sql/native.py``), a pooled connection's DISCARD ALL (``sources.py``)."""
    return dict(conn.execute("SELECT pid, query FROM pg_stat_activity WHERE datname = %s "
                             "AND state = 'idle'", (SPLIT_DB,)).fetchall())


def _maria_sessions() -> set[int]:
    with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
        cur.execute("SELECT id FROM information_schema.processlist WHERE db = %s",
                    (SPLIT_DB,))
        return {row[0] for row in cur.fetchall()}


@pytest.mark.slow
def test_a_worker_opens_its_sources_before_its_first_statement(
        fed_sources, sqlite_template, tmp_path):
    sources = json.dumps({k: v for k, v in fed_sources.items() if k in ("pg", "maria")})
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(sqlite_template, tmp_path),
                     QUARRY_INSTANCE_PATH=str(tmp_path), QUARRY_DATA_SOURCES=sources,
                     QUARRY_DEMO_SOURCE="false", QUARRY_WORKERS="1",
                     QUARRY_FEDERATION_MEMORY=str(64 * 1024 * 1024))
    with _pg(SPLIT_DB) as conn:
        before, maria_before = set(_idle(conn)), _maria_sessions()
        with serving(env, tmp_path) as server:
            # The worker answered a first request (serving waits for /api/status): it had
            # opened a pooled connection to each source and an ADBC session to PostgreSQL
            # before it took any, so no statement runs beside that work.
            opened = {pid: query for pid, query in _idle(conn).items() if pid not in before}
            maria = _maria_sessions() - maria_before
            assert sorted(opened.values()) == ["DISCARD ALL", "ROLLBACK"], opened
            assert len(maria) == 1, maria
            adbc = next(pid for pid, query in opened.items() if query == "ROLLBACK")
            # The first federated statement (the customers' ids against orders.customer_id:
            # a whole table's keys, whose values are counted) runs on those connections.
            sql = ("SELECT o.id, c.name FROM pg.orders o JOIN maria.customers c "
                   "ON c.id = o.customer_id WHERE o.id < 4 ORDER BY o.id")
            body = requests.post(server.url + "/api/sql/query", json={"query": sql},
                                 timeout=60).json()
            assert body.get("data") == [[2, "Fatima 🌍"], [3, "Émile"]], body
            # No other connection was opened for it: its description, its legs' estimates
            # and its columns' counts of values are asked on the pooled connection (one
            # source's questions one after another), its leg read in the ADBC session.
            after = {pid: query for pid, query in _idle(conn).items() if pid not in before}
            assert set(after) == set(opened), (after, opened)
            assert after[adbc] == "ROLLBACK", after


@pytest.mark.slow
def test_a_source_that_is_down_does_not_keep_a_worker_from_its_requests(
        fed_sources, sqlite_template, tmp_path):
    # A port nobody listens on: the worker's attempt at it fails, and the worker serves
    # the statements of the other source (opened at its start) all the same.
    with socket.socket() as free:
        free.bind(("127.0.0.1", 0))
        port = free.getsockname()[1]
    sources = json.dumps({"pg": fed_sources["pg"],
                          "gone": f"postgresql+psycopg://nobody@127.0.0.1:{port}/none"})
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(sqlite_template, tmp_path),
                     QUARRY_INSTANCE_PATH=str(tmp_path), QUARRY_DATA_SOURCES=sources,
                     QUARRY_DEMO_SOURCE="false", QUARRY_WORKERS="1",
                     QUARRY_FEDERATION_MEMORY=str(64 * 1024 * 1024))
    with _pg(SPLIT_DB) as conn:
        before = set(_idle(conn))
        with serving(env, tmp_path) as server:
            opened = {pid: query for pid, query in _idle(conn).items() if pid not in before}
            assert sorted(opened.values()) == ["DISCARD ALL", "ROLLBACK"], opened
            body = requests.post(server.url + "/api/sql/query", json={
                "query": "SELECT id FROM pg.orders WHERE id < 3 ORDER BY id"}, timeout=60).json()
            assert body.get("data") == [[1], [2]], body
            body = requests.post(server.url + "/api/sql/query", json={
                "query": "SELECT 1 FROM gone.t"}, timeout=60).json()
            assert body.get("type") == "error", body


@pytest.fixture
def lite_tables(fed_sources):
    """lite.st_counted (50 rows when analysed, 200 now) and lite.st_plain (200 rows, never
    analysed), beside maria.customers; dropped at the end."""
    import sqlite3

    path = fed_sources["lite"].split(":///", 1)[1]
    with contextlib.closing(sqlite3.connect(path)) as lite:
        for table in ("st_counted", "st_plain"):
            lite.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, customer_id INTEGER)")
            lite.execute(f"CREATE INDEX {table}_customer ON {table} (customer_id)")
        lite.executemany("INSERT INTO st_counted VALUES (?, ?)",
                         [(i, 1 + i % 6) for i in range(50)])
        lite.execute("ANALYZE st_counted")
        lite.executemany("INSERT INTO st_counted VALUES (?, ?)",
                         [(i, 1 + i % 6) for i in range(50, 200)])
        lite.executemany("INSERT INTO st_plain VALUES (?, ?)",
                         [(i, 1 + i % 6) for i in range(200)])
        lite.commit()
    yield
    with contextlib.closing(sqlite3.connect(path)) as lite:
        for table in ("st_counted", "st_plain"):
            lite.execute(f"DROP TABLE IF EXISTS {table}")
        lite.execute("DELETE FROM sqlite_stat1 WHERE tbl LIKE 'st_%'")
        lite.commit()


@pytest.mark.parametrize("table, estimate", [("st_counted", 50), ("st_plain", 200)])
def test_a_whole_sqlite_table_is_sized_by_its_statistics_or_counted(fed_app, fquery,
                                                                    lite_tables, table,
                                                                    estimate):
    # Analysed: sqlite_stat1's figure (50, from before 150 more rows came), not a count of
    # its rows; never analysed: its rows counted (200).
    sql = (f"SELECT s.id, c.name FROM lite.{table} s JOIN maria.customers c "
           "ON c.id = s.customer_id ORDER BY s.id")
    steps = {step[1]: step[0] for step in fquery("EXPLAIN " + sql)["data"]}
    assert f"estimated {estimate} rows by lite" in steps["lite"], steps
    answer = fquery(sql)
    assert answer["type"] == "table" and len(answer["data"]) == 200, answer


def test_a_sqlite_key_is_counted_by_its_statistics_other_columns_by_reading(fed_app,
                                                                           lite_tables):
    # Analysed: the primary key holds a value a row, as many as sqlite_stat1's rows (50,
    # the table's rows then: 150 came since); any other column's values are counted (6).
    # Never analysed: both counted (200, 6).
    from app.sql.estimate import distinct_values
    from app.sql.sources import current_sources

    with fed_app.app_context():
        lite = current_sources().get("lite")
        counts = {(table, column): distinct_values(lite, None, table, column, 5.0)
                  for table in ("st_counted", "st_plain") for column in ("id", "customer_id")}
    assert counts == {("st_counted", "id"): 50, ("st_counted", "customer_id"): 6,
                      ("st_plain", "id"): 200, ("st_plain", "customer_id"): 6}, counts
