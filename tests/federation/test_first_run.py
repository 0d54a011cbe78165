"""Plans good from a statement's first run: a leg that reads a whole table gives its keys to
another leg only when the sources' statistics say those keys are fewer than the values the
other leg's column holds (a table and a column referring to its key: the filter would keep
every row, and the larger leg would only wait).

Each statement here is one the process never ran: what EXPLAIN shows comes from the
sources' statistics alone, and the first run is the one checked.
"""

from __future__ import annotations

import contextlib

import pytest

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


def _statements(things: str) -> tuple[str, str]:
    return (SQL.format(R="pg.fr_refs", T=f"maria.{things}"),
            SQL.format(R="one.fr_refs", T=f"one.{things}"))


def test_the_keys_of_a_whole_table_a_column_refers_to_are_not_waited_for(
        fed_app, fquery, keyed_tables):
    split, one = _statements("fr_things")
    steps = fquery("EXPLAIN " + split)["data"]
    # Estimated from the sources: the smaller leg is the 100 things, but their 100 ids are
    # every value of fr_refs.thing_id: no leg waits for another.
    assert "estimated 100 rows by maria" in steps[1][0], steps
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
