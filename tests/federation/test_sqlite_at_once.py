"""A whole SQLite table joined with another source, read at once by connectorx when its plan
sizes it small and it declares INTEGER and TEXT columns (sql/native_sqlite.py): the answer
is the one the row path gives, to the NULL, the accent and the quote; a table whose values
are not all of the kind their column declares, or a file whose path connectorx's URL cannot
carry, is read as before."""

from __future__ import annotations

import contextlib
import sqlite3

import pytest

from ..helpers import sql_runner
from .conftest import ORDERS

PEOPLE = [(i, None if i % 4 == 0 else f"person {i}", "l'été 🌍" if i % 3 == 0 else "plain")
          for i in range(0, 8)]
JOINED = ("SELECT o.id, p.id AS pid, p.label, p.note FROM pg.orders o "
          "JOIN lite.people p ON p.id = o.customer_id WHERE o.id <= 20 ORDER BY o.id")


def _file(folder, name: str, rows: list[tuple], kind: str = "INTEGER") -> str:
    path = folder / name
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute(f"CREATE TABLE people (id {kind}, label TEXT, note TEXT)")
        lite.executemany("INSERT INTO people VALUES (?, ?, ?)", rows)
        lite.execute("ANALYZE")  # its rows from sqlite_stat1: the plan sizes it
        lite.commit()
    return f"sqlite:///{path}"


def _expected(people: list[tuple]) -> list[list]:
    by_id = {row[0]: row for row in people}
    return [[order[0], order[1], by_id[order[1]][1], by_id[order[1]][2]]
            for order in ORDERS if order[0] <= 20 and order[1] in by_id]


@pytest.mark.parametrize("name", ["people.db", "with space #1.db"])
def test_a_whole_sqlite_table_gives_the_row_paths_answer(make_app, fed_sources, tmp_path,
                                                          name):
    app = make_app(DATA_SOURCES={"pg": fed_sources["pg"],
                                 "lite": _file(tmp_path, name, PEOPLE)})
    run = sql_runner(app.test_client())
    for _ in range(2):  # the first run plans from the statistics, the second from the sizes
        body = run(JOINED)
        assert body["column_names"] == ["id", "pid", "label", "note"]
        assert body["data"] == _expected(PEOPLE)


def test_a_value_of_another_kind_than_declared_is_read_as_before(make_app, fed_sources,
                                                                 tmp_path):
    """SQLite keeps a text in an INTEGER column as text: connectorx refuses to read it as
    an integer, and the row path reads it as the value it is."""
    people = [*PEOPLE[:5], (5, 55, "a number in a TEXT column, made text")]
    url = _file(tmp_path, "mixed.db", people)
    with contextlib.closing(sqlite3.connect(url.removeprefix("sqlite:///"))) as lite:
        lite.execute("INSERT INTO people VALUES ('seven', 'text id', NULL)")
        lite.commit()
    app = make_app(DATA_SOURCES={"pg": fed_sources["pg"], "lite": url})
    run = sql_runner(app.test_client())
    body = run("SELECT p.id, p.label, count(o.id) AS n FROM lite.people p "
               "LEFT JOIN pg.orders o ON o.note = p.label GROUP BY p.id, p.label "
               "ORDER BY p.label")
    ids = {row[1]: row[0] for row in body["data"]}
    assert ids["text id"] == "seven" and str(ids["55"]) == "5", body["data"]
    assert len(body["data"]) == len(people) + 1


def test_a_value_longer_than_the_connection_allows_is_refused_as_before(make_app, fed_sources,
                                                                        tmp_path):
    """The row path's connection refuses a value beyond SQL_MAX_RESPONSE_BYTES; read at
    once, the same table is declined and refused the same way, not read whole."""
    people = [*PEOPLE[:3], (3, "long", "x" * 20_000)]
    app = make_app(SQL_MAX_RESPONSE_BYTES=8192,
                   DATA_SOURCES={"pg": fed_sources["pg"],
                                 "lite": _file(tmp_path, "long.db", people)})
    body = sql_runner(app.test_client())(JOINED)
    assert body["type"] == "error" and "too big" in body["error_message"], body


def test_hostile_table_and_column_names_read_at_once(make_app, fed_sources, tmp_path):
    """Quoted names with quotes, spaces and case: the leg's own SQL names them, and the
    columns come back under the names the row path gives them."""
    path = tmp_path / "odd.db"
    with contextlib.closing(sqlite3.connect(path)) as lite:
        lite.execute('CREATE TABLE "we""ird tab" ("Id" INTEGER, "lab el" TEXT, "É" TEXT)')
        lite.executemany('INSERT INTO "we""ird tab" VALUES (?, ?, ?)',
                         [(i, f"x'{i}\"", "ünï" if i % 2 else None) for i in range(8)])
        lite.execute("ANALYZE")
        lite.commit()
    app = make_app(DATA_SOURCES={"pg": fed_sources["pg"], "lite": f"sqlite:///{path}"})
    body = sql_runner(app.test_client())(
        'SELECT o.id, t."lab el", t."É" FROM pg.orders o JOIN lite."we""ird tab" t '
        'ON t."Id" = o.customer_id WHERE o.id <= 8 ORDER BY o.id')
    expected = [[order[0], f"x'{order[1]}\"", "ünï" if order[1] % 2 else None]
                for order in ORDERS if order[0] <= 8]
    assert body["data"] == expected, body
