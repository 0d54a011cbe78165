"""A MariaDB leg its plan knows to be small is read at once (sql/native_mysql.py,
AT_ONCE_ROWS): connectorx reads it whole into one Arrow table, leaving the interpreter's
lock to the legs read beside it. Such a read is still stopped by a cancel in the database,
and a leg that turns out larger than its plan said (more than twice AT_ONCE_ROWS) is
read again as a stream, whole: no row is lost to the bound.

The reads are seen in MariaDB's own process list, where the read at once runs as the leg's
query in a derived table named ``quarry_whole``.
"""

from __future__ import annotations

import contextlib
import threading
import time

import pytest

from app.sql import native_mysql

from .conftest import SPLIT_DB, _mysql

SLOW = ("SELECT o.id, w.x FROM pg.orders o JOIN maria.once_slow w ON w.id = o.id "
        "ORDER BY o.id")


@pytest.fixture(scope="module")
def once_tables(fed_sources):
    """maria.once_rows (ids 1..3, grown by the tests), and maria.once_slow: 40 rows, each
    sleeping once_delay.d seconds when read (0 until a test sets it)."""
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE once_rows (id INT, label VARCHAR(10))")
        cur.executemany("INSERT INTO once_rows VALUES (%s, %s)",
                        [(i, f"r{i}") for i in range(1, 4)])
        cur.execute("CREATE TABLE once_delay (d DOUBLE)")
        cur.execute("INSERT INTO once_delay VALUES (0)")
        cur.execute("CREATE TABLE once_ids (id INT)")
        cur.executemany("INSERT INTO once_ids VALUES (%s)", [(i,) for i in range(1, 41)])
        cur.execute("CREATE VIEW once_slow AS SELECT i.id, "
                    "i.id + SLEEP((SELECT d FROM once_delay)) AS x FROM once_ids i")
    yield
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("DROP VIEW once_slow")
        cur.execute("DROP TABLE once_rows, once_delay, once_ids")


def _running(pattern: str) -> list[str]:
    with contextlib.closing(_mysql()) as conn, conn.cursor() as cur:
        cur.execute("SELECT INFO FROM information_schema.PROCESSLIST "
                    "WHERE INFO LIKE %s AND ID <> CONNECTION_ID()", (f"%{pattern}%",))
        return [row[0] for row in cur.fetchall()]


def test_a_small_legs_read_at_once_is_stopped_by_a_cancel_in_the_database(
        fed_app, fquery, once_tables):
    # Quick first: the plan learns the leg's 40 rows. Then every row sleeps 0.25 s.
    quick = fquery(SLOW)
    assert quick["type"] == "table" and len(quick["data"]) == 40, quick
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("UPDATE once_delay SET d = 0.25")
    client = fed_app.test_client()
    answer: dict = {}
    thread = threading.Thread(target=lambda: answer.update(client.post(
        "/api/sql/query", json={"query": SLOW}).get_json()))
    thread.start()
    try:
        seen: list[str] = []
        deadline = time.monotonic() + 10
        while not seen and time.monotonic() < deadline:
            time.sleep(0.1)
            seen = _running("once_slow")
        assert seen and "quarry_whole" in seen[0], seen  # read at once, running
        listed: list[dict] = []
        while not listed and time.monotonic() < deadline:
            listed = [q for q in client.get("/api/sql/queries").get_json()
                      if q["statement"] == SLOW]
            time.sleep(0.05)
        assert len(listed) == 1, client.get("/api/sql/queries").get_json()
        asked = time.monotonic()
        assert client.delete(f"/api/sql/queries/{listed[0]['query_id']}").status_code in (
            200, 202, 204)
        thread.join(10)
        assert not thread.is_alive()
        assert answer["type"] == "error" and answer["error_code"] == 22, answer  # CANCELLED
        assert time.monotonic() - asked < 2
        gone = time.monotonic() + 2
        while _running("once_slow") and time.monotonic() < gone:
            time.sleep(0.05)
        assert _running("once_slow") == []
    finally:
        with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
            cur.execute("UPDATE once_delay SET d = 0")
        thread.join(30)


def test_a_leg_larger_than_its_plan_said_is_read_whole_as_a_stream(
        fed_app, fquery, once_tables, monkeypatch):
    # At most one row read at once here, so two rows bound that read.
    monkeypatch.setattr(native_mysql, "AT_ONCE_ROWS", 1)
    sql = ("SELECT r.id, r.label, o.amount FROM maria.once_rows r JOIN pg.orders o "
           "ON o.id = r.id WHERE r.id <= 2 ORDER BY r.id")
    small = fquery(sql)["data"]
    assert [row[:2] for row in small] == [[1, "r1"], [2, "r2"]]
    whole = sql.replace(" WHERE r.id <= 2", "")
    assert [row[0] for row in fquery(whole)["data"]] == [1, 2, 3]  # learnt: 3 rows
    # The table grows to 45 rows: the plan still says 3, more than AT_ONCE_ROWS (a
    # stream) ...
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO once_rows VALUES (%s, %s)",
                        [(i, f"r{i}") for i in range(4, 46)])
    assert [row[0] for row in fquery(whole)["data"]] == list(range(1, 46))
    # ... and a shape whose plan says 1 row is read at once, bounded at 6 rows: the 45
    # are read again as a stream, all of them.
    monkeypatch.setattr(native_mysql, "AT_ONCE_ROWS", 3)
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM once_rows WHERE id > 1")
    label = sql.replace(" WHERE r.id <= 2", " WHERE r.label LIKE 'r%'")
    assert [row[0] for row in fquery(label)["data"]] == [1]  # learnt: 1 row
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO once_rows VALUES (%s, %s)",
                        [(i, f"r{i}") for i in range(2, 46)])
    assert [row[0] for row in fquery(label)["data"]] == list(range(1, 46))
