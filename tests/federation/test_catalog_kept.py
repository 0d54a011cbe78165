"""What a process keeps of the sources' catalogs between federated statements (docs/
federation.md, "Fixed cost"): each table's columns for FEDERATION_CATALOG_TTL_S, and each
statement's plan while its tables' columns are the same.

A table changed in its source within that time never gives a wrong answer: a statement
that fails as the change makes it fail (a column that is no longer there, a column the
kept description lacks) is planned again with fresh descriptions; a source replaced
through the store is a new source, described anew; only ``SELECT *`` may miss a column
added less than FEDERATION_CATALOG_TTL_S ago.
"""

from __future__ import annotations

import contextlib
from urllib.parse import urlsplit

import pytest

from app.federation.engine import current_engine

from .conftest import ONE_DB, SPLIT_DB, _mysql, _pg
from .test_federation import _both

ITEMS = [(1, "a"), (2, "b's"), (3, "c"), (9, "none of them")]


@pytest.fixture(scope="module")
def items(fed_sources):
    """pg.kept_a, pg.kept_b, pg.kept_c and maria.kept_m (id, label), also in the one
    database; dropped at the end."""
    tables = ("kept_a", "kept_b", "kept_c")
    for database in (SPLIT_DB, ONE_DB):
        with _pg(database) as conn, conn.cursor() as cur:
            for table in tables + (("kept_m",) if database == ONE_DB else ()):
                cur.execute(f"CREATE TABLE {table} (id integer, label text)")
                cur.executemany(f"INSERT INTO {table} VALUES (%s, %s)", ITEMS)
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE kept_m (id INT, label VARCHAR(20))")
        cur.executemany("INSERT INTO kept_m VALUES (%s, %s)", ITEMS)
    yield
    for database in (SPLIT_DB, ONE_DB):
        with _pg(database) as conn:
            for table in tables + ("kept_m",):
                conn.execute(f"DROP TABLE IF EXISTS {table}")
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS kept_m")


def _split(fquery, sql: str) -> dict:
    answer = fquery(sql)
    assert answer["type"] == "table", answer
    return answer


def test_a_renamed_column_is_read_anew_within_the_time_kept(fed_app, fquery, items):
    star = ("SELECT * FROM pg.kept_a i JOIN maria.customers c ON c.id = i.id "
            "ORDER BY i.id")
    first = _split(fquery, star)
    assert first["column_names"][:2] == ["id", "label"]
    assert [row[:2] for row in first["data"]] == [[1, "a"], [2, "b's"], [3, "c"]]
    with _pg(SPLIT_DB) as conn:
        conn.execute("ALTER TABLE kept_a RENAME COLUMN label TO title")
    # The kept description still says label: the leg fails in PostgreSQL, and the
    # statement is planned again with the table described anew.
    again = _split(fquery, star)
    assert again["column_names"][:2] == ["id", "title"]
    assert again["data"] == first["data"]
    gone = fquery("SELECT i.label FROM pg.kept_a i JOIN maria.customers c ON c.id = i.id")
    assert gone["type"] == "error" and "label" in gone["error_message"], gone
    with _pg(SPLIT_DB) as conn:
        conn.execute("ALTER TABLE kept_a RENAME COLUMN title TO label")
    # Kept: title. The statement names label: the plan cannot be made from what was kept,
    # so the table is described anew.
    named = _split(fquery, "SELECT i.label, c.name FROM pg.kept_a i JOIN maria.customers c "
                           "ON c.id = i.id ORDER BY i.id")
    assert named["data"] == [["a", "Ada"], ["b's", "Björn"], ["c", "Chloé"]]


def test_a_column_added_shows_in_select_star_once_the_time_kept_is_over(
        fed_app, fquery, items, monkeypatch):
    # Kept long enough that a loaded machine cannot end the time between two statements.
    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 600.0)
    star = "SELECT * FROM pg.kept_b i JOIN maria.kept_m m ON m.id = i.id ORDER BY i.id"
    assert _split(fquery, star)["column_names"] == ["id", "label", "id", "label"]
    with _pg(SPLIT_DB) as conn:
        conn.execute("ALTER TABLE kept_b ADD COLUMN weight integer DEFAULT 7")
    # Within FEDERATION_CATALOG_TTL_S: the columns as described (the answer is right
    # for them).
    kept = _split(fquery, star)
    assert kept["column_names"] == ["id", "label", "id", "label"]
    assert [row[1] for row in kept["data"]] == ["a", "b's", "c", "none of them"]
    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 0.0)
    fresh = _split(fquery, star)
    assert fresh["column_names"] == ["id", "label", "weight", "id", "label"]
    assert [row[2] for row in fresh["data"]] == [7, 7, 7, 7]
    # Named, the new column is found within the time kept too.
    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 600.0)
    with _pg(SPLIT_DB) as conn:
        conn.execute("ALTER TABLE kept_b ADD COLUMN height integer DEFAULT 3")
    named = _split(fquery, "SELECT i.height, m.label FROM pg.kept_b i JOIN maria.kept_m m "
                           "ON m.id = i.id WHERE i.id = 1")
    assert named["data"] == [[3, "a"]]


def test_a_source_replaced_through_the_store_is_described_anew(fed_app, fquery, items):
    url = urlsplit(fed_app.config["DATA_SOURCES"]["pg"].replace("+psycopg", ""))
    params = {"host": url.hostname, "port": url.port or 5432, "user": url.username,
              "password": url.password or "", "database": SPLIT_DB}
    sql = "SELECT * FROM kept_rt.kept_c i JOIN maria.kept_m m ON m.id = i.id ORDER BY i.id"

    def create(database: str) -> None:
        made = fquery("CREATE DATABASE kept_rt WITH ENGINE = 'postgres', PARAMETERS = "
                      + str({**params, "database": database}).replace("'", '"'))
        assert made["type"] == "ok", made

    create(SPLIT_DB)
    try:
        assert _split(fquery, sql)["column_names"] == ["id", "label", "id", "label"]
        with _pg(ONE_DB) as conn:
            conn.execute("ALTER TABLE kept_c ADD COLUMN weight integer DEFAULT 5")
        assert fquery("DROP DATABASE kept_rt")["type"] == "ok"
        create(ONE_DB)
        # Another source of the same name (another database): its table as it is there.
        answer = _split(fquery, sql)
        assert answer["column_names"] == ["id", "label", "weight", "id", "label"]
        assert [row[2] for row in answer["data"]] == [5, 5, 5, 5]
    finally:
        fquery("DROP DATABASE IF EXISTS kept_rt")


def test_tables_of_one_source_described_together_keep_their_own_columns(
        fed_app, fquery, items):
    # Three PostgreSQL tables with the same column names, two MariaDB ones, SQLite's:
    # one description query per source, split back into each table's columns.
    template = ("SELECT a.label AS a, c.label AS c, o.amount, m.label AS m, cu.name, "
                "t.goal FROM {pa} a JOIN {pc} c ON c.id = a.id JOIN {O} o ON o.id = a.id "
                "JOIN {mm} m ON m.id = a.id JOIN {C} cu ON cu.id = a.id "
                "LEFT JOIN {T} t ON t.country = cu.country ORDER BY a.id")
    split = _both(template.replace("{pa}", "pg.kept_a").replace("{pc}", "pg.kept_c")
                  .replace("{mm}", "maria.kept_m"))[0]
    one = _both(template.replace("{pa}", "one.kept_a").replace("{pc}", "one.kept_c")
                .replace("{mm}", "one.kept_m"))[1]
    want = fquery(one)
    assert want["type"] == "table", want
    for _ in range(2):  # described, then kept
        got = _split(fquery, split)
        assert got["column_names"] == want["column_names"]
        assert got["data"] == want["data"]


@pytest.mark.parametrize("value", [1, 2, "2"])
def test_a_kept_plan_takes_each_runs_parameters(fed_app, fquery, value):
    template = ("SELECT o.id, c.name FROM {O} o JOIN {C} c ON c.id = o.customer_id "
                "WHERE o.id = :n ORDER BY o.id")
    split, one = _both(template)
    want = fquery(one, params={"n": value})
    assert want["type"] == "table", want
    for _ in range(2):
        assert fquery(split, params={"n": value})["data"] == want["data"]


def test_a_leg_read_with_dynamic_filters_is_sized_by_what_it_sent(fed_app, fquery, items):
    # kept_a was never analysed: PostgreSQL's planner guesses its rows. Once read with the
    # customers' keys, the rows it sent size it in the next plan (EXPLAIN says so), and
    # the answer stays the one database's.
    # As a fresh worker would plan it: what the session's app learnt of these legs in other
    # files (the customers' leg, read whole or filtered) must not choose the plan here.
    with fed_app.app_context():
        engine = current_engine()
        for kept in (engine.sizes, engine.estimates, engine.plans, engine.described):
            kept.clear()
    template = ("SELECT i.label, c.name FROM {a} i JOIN {C} c ON c.id = i.id "
                "WHERE c.country = 'FR' ORDER BY i.id")
    split = _both(template.replace("{a}", "pg.kept_a"))[0]
    one = _both(template.replace("{a}", "one.kept_a"))[1]
    want = fquery(one)
    assert want["data"] == [["a", "Ada"], ["c", "Chloé"]], want
    notes = []
    for _ in range(3):
        assert _split(fquery, split)["data"] == want["data"]
        notes.append(" ".join(step[0] for step in fquery("EXPLAIN " + split)["data"]))
    assert any("2 rows when last run with dynamic filters" in note for note in notes), notes


@pytest.fixture
def changing(fed_sources):
    """pg.kept_t (id, amount numeric(6,2), note integer) and maria.kept_u (id, score INT),
    for a test that changes their columns' types; dropped at the end."""
    with _pg(SPLIT_DB) as conn:
        conn.execute("CREATE TABLE kept_t (id integer, amount numeric(6,2), note integer)")
        conn.execute("INSERT INTO kept_t VALUES (1, 10.25, 7), (2, 3.50, 8), (3, 1.00, 9)")
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE kept_u (id INT, score INT)")
        cur.execute("INSERT INTO kept_u VALUES (1, 40), (2, 50), (4, 60)")
    yield
    with _pg(SPLIT_DB) as conn:
        conn.execute("DROP TABLE IF EXISTS kept_t")
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("DROP TABLE IF EXISTS kept_u")


CHANGING = ("SELECT t.id, t.amount, t.note, u.score FROM pg.kept_t t "
            "JOIN maria.kept_u u ON u.id = t.id ORDER BY t.id")


def test_a_leg_read_again_is_not_described_again(fed_app, fquery, changing, monkeypatch):
    """A leg's result is described by its source once (PostgreSQL: DECLARE in the pooled
    session; MariaDB: the statement in a derived table with LIMIT 0); read again within
    FEDERATION_CATALOG_TTL_S, its kept shape stands for that description."""
    from app.sql import stream

    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 600.0)
    asked: list[str] = []
    declare, limit_0 = stream._open_postgresql, stream._describe_mysql

    def counted(name, real):
        def call(*args, **kwargs):
            asked.append(name)
            return real(*args, **kwargs)
        return call

    monkeypatch.setattr(stream, "_open_postgresql", counted("postgresql", declare))
    monkeypatch.setattr(stream, "_describe_mysql", counted("mariadb", limit_0))
    first = _split(fquery, CHANGING)
    assert first["data"] == [[1, "10.25", 7, 40], [2, "3.50", 8, 50]] or \
        first["data"] == [[1, 10.25, 7, 40], [2, 3.5, 8, 50]], first
    assert sorted(set(asked)) == ["mariadb", "postgresql"], asked
    asked.clear()
    assert _split(fquery, CHANGING)["data"] == first["data"]
    assert asked == []
    # A source replaced through the store, or the time kept over: described again.
    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 0.0)
    assert _split(fquery, CHANGING)["data"] == first["data"]
    assert sorted(set(asked)) == ["mariadb", "postgresql"], asked


CHANGES = {
    # numeric(6, 2) to (8, 4) reads as the same text, and its values no longer fit the
    # kept decimal; integer to text reads otherwise.
    "postgresql": ["ALTER TABLE kept_t ALTER note TYPE text USING 'n' || note::text",
                   "ALTER TABLE kept_t ALTER amount TYPE numeric(8,4)",
                   "UPDATE kept_t SET amount = amount + 0.0001"],
    "mariadb": ["ALTER TABLE kept_u MODIFY score VARCHAR(10)",
                "UPDATE kept_u SET score = CONCAT('s', score)"],
}
CHANGED = {"postgresql": [[1, "10.2501", "n7", 40], [2, "3.5001", "n8", 50]],
           "mariadb": [[1, "10.25", 7, "s40"], [2, "3.5", 8, "s50"]]}


@pytest.mark.parametrize("source", sorted(CHANGES))
def test_a_column_whose_type_changed_is_read_anew_within_the_time_kept(
        fed_app, fquery, changing, monkeypatch, source):
    """The kept shape of a leg whose table changed type within FEDERATION_CATALOG_TTL_S
    never gives the answer of the old type: the leg's first batch no longer has the kept
    shape (or its values do not fit the kept type), and the statement is planned and run
    again with everything described anew."""
    monkeypatch.setitem(fed_app.config, "FEDERATION_CATALOG_TTL_S", 600.0)
    before = _split(fquery, CHANGING)["data"]
    assert [row[2] for row in before] == [7, 8]
    if source == "postgresql":
        with _pg(SPLIT_DB) as conn:
            for change in CHANGES[source]:
                conn.execute(change)
    else:
        with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
            for change in CHANGES[source]:
                cur.execute(change)
    after = _split(fquery, CHANGING)
    assert [[row[0], str(row[1]), row[2], row[3]] for row in after["data"]] == \
        CHANGED[source], after
