"""A knowledge base as a table in a statement over several sources (issue 31): its search,
with the conditions written on it, becomes a table of hits that the federation engine
joins to PostgreSQL's and MariaDB's tables. Each answer is checked against the same join
computed here from the rows the sources hold (conftest.py) and the search alone."""

from __future__ import annotations

import contextlib
import csv
import io
import json
import os
import shutil
import uuid
from decimal import Decimal

import pyarrow as pa
import pytest

from app import create_app

from ..conftest import _dispose
from ..helpers import sql_runner
from .conftest import CUSTOMERS, ORDERS, SPLIT_DB, _mysql, _pg

# One note per customer (its id), with a team as metadata.
NOTES = {
    1: ("The printer jams whenever the paper is damp.", "hardware"),
    2: ("Asked how to reset a forgotten password.", "accounts"),
    3: ("Wants the invoices sent as PDF files each month.", "billing"),
    4: ("Paper keeps getting stuck in the office printer tray.", "hardware"),
    5: ("Requested a refund to the card used for the purchase.", "billing"),
    6: ("Cannot sign in after changing the login password.", "accounts"),
}
NAMES = {c[0]: c[1] for c in CUSTOMERS}


# Tickets whose ids are uuid-like text, in MariaDB among many others.
TICKETS = {
    "3f2b8c1e-0d4a-4c6e-9b7a-1e2f3a4b5c6d": "The screen flickers after the update.",
    "a9e0f7d2-5b3c-4e1f-8d6a-7c8b9a0f1e2d": "The monitor goes dark and flickers.",
    "0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f": "How do I export my contacts?",
}
# Text ids that the engine reads as integers when it compares them with an integer column
# (DuckDB's cast: a hexadecimal literal, leading zeros, a digit separator).
CODES = {"0x10": 16, "0007": 7, "1_000": 1000}
# Rows of the large tables; a leg may send at most LEG_ROWS (FEDERATION_MAX_LEG_ROWS), so
# a statement that reads one of them whole fails, and one cut to the hits' ids does not.
BIG, LEG_ROWS = 5_000, 500


@pytest.fixture(scope="module")
def big_tables(fed_sources):
    """pg.big_docs (integer ids 1..BIG) and maria.tickets (uuid-like text ids: TICKETS and
    BIG others)."""
    with _pg(SPLIT_DB) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE big_docs (id integer PRIMARY KEY, title text)")
        cur.execute(f"INSERT INTO big_docs SELECT n, 'title ' || n FROM "
                    f"generate_series(1, {BIG}) AS n")
    rows = [(key, f"subject of {key}") for key in TICKETS] + \
        [(str(uuid.UUID(int=n + 1)), f"other {n}") for n in range(BIG)]
    with contextlib.closing(_mysql(SPLIT_DB)) as conn, conn.cursor() as cur:
        cur.execute("CREATE TABLE tickets (id VARCHAR(36) PRIMARY KEY, subject TEXT)")
        cur.executemany("INSERT INTO tickets VALUES (%s, %s)", rows)


@pytest.fixture(scope="module")
def kb_app(fed_sources, big_tables, sqlite_template, session_dir, tmp_path_factory):
    store = os.path.join(session_dir, "kb-join-store.db")
    shutil.copy(sqlite_template, store)
    app = create_app({"DATABASE_URL": f"sqlite:///{store}", "INSTANCE_PATH": session_dir,
                      "TESTING": True, "DATA_SOURCES": fed_sources, "SQL_TIMEOUT_S": 10.0,
                      "KB_DIR": str(tmp_path_factory.mktemp("kbjoin")),
                      "FEDERATION_MEMORY": 64 * 1024 * 1024,
                      "FEDERATION_MAX_LEG_ROWS": LEG_ROWS})
    run = sql_runner(app.test_client())
    assert run("CREATE KNOWLEDGE_BASE mindsdb.notes USING metadata_columns = ['team']"
               )["type"] == "ok"
    values = ", ".join(f"({i}, '{text}', '{team}')" for i, (text, team) in NOTES.items())
    assert run(f"INSERT INTO mindsdb.notes (id, content, team) VALUES {values}"
               )["type"] == "ok"
    assert run("CREATE KNOWLEDGE_BASE mindsdb.tickets")["type"] == "ok"
    values = ", ".join(f"('{key}', '{text}')" for key, text in TICKETS.items())
    assert run(f"INSERT INTO mindsdb.tickets (id, content) VALUES {values}")["type"] == "ok"
    assert run("CREATE KNOWLEDGE_BASE mindsdb.codes")["type"] == "ok"
    values = ", ".join(f"('{key}', 'note {n}')" for n, key in enumerate(CODES))
    assert run(f"INSERT INTO mindsdb.codes (id, content) VALUES {values}")["type"] == "ok"
    yield app
    _dispose(app)


@pytest.fixture(scope="module")
def query(kb_app):
    return sql_runner(kb_app.test_client())


def _table(body: dict) -> list[dict]:
    assert body["type"] == "table", body
    return [dict(zip(body["column_names"], row, strict=True)) for row in body["data"]]


def _search(query, text: str, extra: str = "") -> list[dict]:
    return _table(query(f"SELECT id, relevance FROM mindsdb.notes WHERE content = '{text}'"
                        f"{extra}"))


def test_a_search_joins_a_mariadb_table_by_id(query):
    hits = _search(query, "paper stuck in the printer", " LIMIT 2")
    body = query("SELECT c.name, kb.id, kb.chunk_content, kb.relevance FROM maria.customers c "
                 "JOIN mindsdb.notes kb ON kb.id = c.id WHERE kb.content = 'paper stuck in "
                 "the printer' ORDER BY kb.relevance DESC LIMIT 2")
    found = _table(body)
    assert body["column_names"] == ["name", "id", "chunk_content", "relevance"]
    assert [r["id"] for r in found] == [h["id"] for h in hits]
    assert {r["id"] for r in found} == {"1", "4"}  # the two printer notes
    for row in found:
        assert row["name"] == NAMES[int(row["id"])]
        assert row["chunk_content"] == NOTES[int(row["id"])][0]
        assert row["relevance"] == pytest.approx(
            next(h["relevance"] for h in hits if h["id"] == row["id"]))


def test_three_sources_with_metadata_and_relevance_on_the_knowledge_base(query):
    # The billing notes (metadata filter), joined to MariaDB's customers and PostgreSQL's
    # orders, aggregated in the engine.
    hits = _search(query, "money back or invoices", " AND team = 'billing'")
    assert {h["id"] for h in hits} == {"3", "5"}
    body = query("SELECT c.name AS name, count(*) AS orders, sum(o.amount) AS total "
                 "FROM mindsdb.notes AS kb JOIN maria.customers AS c ON c.id = kb.id "
                 "JOIN pg.orders AS o ON o.customer_id = c.id "
                 "WHERE kb.content = 'money back or invoices' AND kb.team = 'billing' "
                 "GROUP BY c.name ORDER BY c.name")
    expected = {}
    for order in ORDERS:
        if order[1] in (3, 5):
            n, total = expected.get(NAMES[order[1]], (0, Decimal(0)))
            expected[NAMES[order[1]]] = (n + 1, total + Decimal(order[2]))
    assert [(r["name"], r["orders"], Decimal(str(r["total"]))) for r in _table(body)] == \
        sorted((name, n, total) for name, (n, total) in expected.items())
    # A relevance floor is the search's: fewer hits, fewer rows.
    best = hits[0]
    floor = (best["relevance"] + hits[1]["relevance"]) / 2
    narrow = _table(query(
        "SELECT kb.id FROM pg.orders o JOIN mindsdb.notes kb ON kb.id = o.customer_id "
        f"WHERE kb.content = 'money back or invoices' AND kb.relevance >= {floor} "
        "AND kb.team = 'billing' AND o.id <= 20"))
    assert {r["id"] for r in narrow} == {best["id"]}
    assert len(narrow) == sum(1 for o in ORDERS if o[0] <= 20 and str(o[1]) == best["id"])


def test_a_listing_without_content_and_a_left_join(query):
    # No content: every chunk the filters keep; a LEFT JOIN keeps customers without a note.
    body = query("SELECT c.id AS cid, kb.id AS kid FROM maria.customers c LEFT JOIN "
                 "mindsdb.notes kb ON kb.id = c.id AND kb.team = 'accounts' ORDER BY c.id")
    accounts = {i for i, (_, team) in NOTES.items() if team == "accounts"}
    assert [(r["cid"], r["kid"]) for r in _table(body)] == \
        [(c[0], str(c[0]) if c[0] in accounts else None) for c in CUSTOMERS]
    # The metadata object is JSON in the engine.
    meta = _table(query("SELECT json_extract_string(kb.metadata, '$.team') AS team, c.name "
                        "FROM mindsdb.notes kb JOIN maria.customers c ON c.id = kb.id "
                        "WHERE kb.id = 2"))
    assert meta == [{"team": "accounts", "name": NAMES[2]}]


def test_stars_subqueries_and_hostile_text(query):
    body = query("SELECT c.*, kb.chunk_content FROM maria.customers c JOIN mindsdb.notes kb "
                 "ON kb.id = c.id WHERE kb.content = 'forgot my password' AND c.id < 6")
    assert body["column_names"] == ["id", "name", "country", "joined", "score",
                                    "chunk_content"]
    hits = _search(query, "forgot my password")
    assert sorted(r["id"] for r in _table(body)) == sorted(int(h["id"]) for h in hits
                                                           if int(h["id"]) < 6)
    inner = _table(query(
        "SELECT s.name FROM (SELECT c.name, kb.relevance FROM mindsdb.notes kb JOIN "
        "maria.customers c ON c.id = kb.id WHERE kb.content = 'password' "
        "AND kb.team = 'accounts') AS s ORDER BY s.relevance DESC"))
    assert sorted(r["name"] for r in inner) == sorted([NAMES[2], NAMES[6]])
    cte = _table(query(
        "WITH h AS (SELECT id FROM mindsdb.notes WHERE content = 'printer' AND team = "
        "'hardware') SELECT c.name FROM maria.customers c JOIN h ON h.id = c.id"))
    assert sorted(r["name"] for r in cte) == sorted([NAMES[1], NAMES[4]])
    # A subquery of the WHERE: the data source's table filtered by the search's ids (text,
    # as in a search's answer: IN compares only values of one type).
    chosen = _table(query(
        "SELECT c.name FROM maria.customers c WHERE c.id IN (SELECT CAST(id AS INTEGER) "
        "FROM mindsdb.notes WHERE content = 'refund or invoice' AND team = 'billing') "
        "ORDER BY c.name"))
    assert [r["name"] for r in chosen] == sorted([NAMES[3], NAMES[5]])
    # Quotes, a comment marker and unicode in the search text stay text.
    hostile = "it''s -- 🌍 /* printer */ ; DROP TABLE x"
    hits = _search(query, hostile)
    order = next(o for o in ORDERS if o[1] in NOTES)
    joined = _table(query(f"SELECT kb.id FROM mindsdb.notes kb JOIN pg.orders o "
                          f"ON o.customer_id = kb.id WHERE kb.content = '{hostile}' "
                          f"AND o.id = {order[0]}"))
    assert len(hits) == len(NOTES)
    assert [r["id"] for r in joined] == [str(order[1])]


def test_bad_conditions_on_the_knowledge_base_are_clear_errors(query):
    for sql, words in [
        ("SELECT * FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.id "
         "WHERE kb.content LIKE 'x%'", ["content = 'text'"]),
        ("SELECT * FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.id "
         "WHERE kb.content = c.name", ["column <op> constant"]),
        ("SELECT * FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.id "
         "WHERE kb.colour = 'red'", ["colour"]),
        ("SELECT * FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.id "
         "WHERE kb.relevance >= 0.5", ["content"]),
        ("SELECT * FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.nowhere "
         "WHERE kb.content = 'x'", ["nowhere"]),
        ("SELECT * FROM maria.customers c JOIN mindsdb.nothing kb ON kb.id = c.id",
         ["nothing"]),
    ]:
        body = query(sql)
        assert body["type"] == "error", (sql, body)
        for word in words:
            assert word in body["error_message"], (sql, body)


def test_the_joined_leg_reads_only_the_rows_whose_id_is_a_hit(query):
    # The hits' ids are text (MindsDB's shape), pg's are integers: the leg gets
    # ``id IN (…)`` with the ids as integers, and sends a handful of its 5 000 rows where
    # a leg may send 500.
    hits = _search(query, "paper stuck in the printer", " LIMIT 3")
    sql = ("SELECT d.id, d.title, k.relevance FROM mindsdb.notes AS k JOIN pg.big_docs AS d "
           "ON d.id = k.id WHERE k.content = 'paper stuck in the printer' "
           "ORDER BY k.relevance DESC LIMIT 3")
    found = _table(query(sql))
    assert [r["id"] for r in found] == [int(h["id"]) for h in hits]
    assert [r["title"] for r in found] == [f"title {h['id']}" for h in hits]
    # The same join on an expression of the id gets no filter: the whole table comes.
    whole = query(sql.replace("ON d.id = k.id", "ON d.id + 0 = k.id"))
    assert whole["type"] == "error" and "FEDERATION_MAX_LEG_ROWS" in whole["error_message"]
    # EXPLAIN names the search, and the leg cut by its ids.
    steps = _table(query("EXPLAIN " + sql))
    assert steps[0]["source"] == "mindsdb.notes"
    assert steps[0]["step"].startswith("search 1: k; knowledge base mindsdb.notes, up to 10")
    assert steps[0]["sql"] == ("SELECT * FROM mindsdb.notes WHERE content = 'paper stuck "
                               "in the printer' LIMIT 10")
    assert steps[1]["source"] == "pg" and steps[1]["step"].endswith(
        'filtered by the id values of the hits of knowledge base mindsdb.notes: "d"."id" '
        "IN (…)"), steps
    assert [s["step"].split(":")[0] for s in steps] == ["search 1", "leg 1", "engine"]


def test_uuid_like_text_ids_cut_a_mariadb_leg(query):
    hits = _search_tickets(query, "a flickering display")
    assert len(hits) == len(TICKETS)
    found = _table(query(
        "SELECT t.id, t.subject, k.chunk_content FROM maria.tickets t JOIN mindsdb.tickets k "
        "ON k.id = t.id WHERE k.content = 'a flickering display'"))
    assert sorted(r["id"] for r in found) == sorted(TICKETS)
    for row in found:
        assert row["subject"] == f"subject of {row['id']}"
        assert row["chunk_content"] == TICKETS[row["id"]]
    # A LEFT JOIN keeps every hit; its NULL side (the table) is still cut to their ids.
    left = _table(query(
        "SELECT k.id, t.subject FROM mindsdb.tickets k LEFT JOIN maria.tickets t "
        "ON t.id = k.id AND t.subject <> 'subject of 0c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f' "
        "WHERE k.content = 'export contacts'"))
    assert sorted((r["id"], r["subject"]) for r in left) == sorted(
        (key, None if key.startswith("0c1d") else f"subject of {key}") for key in TICKETS)


def _search_tickets(query, text: str) -> list[dict]:
    return _table(query(f"SELECT id FROM mindsdb.tickets WHERE content = '{text}'"))


def test_a_knowledge_base_in_union_cte_and_subquery(query):
    printer = {h["id"] for h in _search(query, "printer", " LIMIT 2")}
    union = _table(query(
        "SELECT id FROM mindsdb.notes WHERE content = 'printer' LIMIT 2 UNION "
        "SELECT CAST(id AS TEXT) FROM maria.customers WHERE id = 6"))
    assert {r["id"] for r in union} == printer | {"6"}
    both = _table(query(
        "SELECT id FROM mindsdb.notes WHERE content = 'printer' LIMIT 2 INTERSECT "
        "SELECT id FROM mindsdb.notes WHERE team = 'hardware'"))
    assert {r["id"] for r in both} == printer & {"1", "4"}
    # A CTE and a subquery in FROM, with a data source as the context.
    cte = query("WITH h AS (SELECT id FROM mindsdb.notes WHERE content = 'printer' AND "
                "team = 'hardware') SELECT c.name FROM customers c JOIN h ON h.id = c.id",
                db="maria")
    assert sorted(r["name"] for r in _table(cte)) == sorted([NAMES[1], NAMES[4]])
    inner = _table(query(
        "SELECT s.id, count(*) AS n FROM (SELECT id FROM mindsdb.notes WHERE content = "
        "'printer' LIMIT 2) s JOIN pg.orders o ON o.customer_id = s.id GROUP BY s.id"))
    assert {r["id"]: r["n"] for r in inner} == {
        key: sum(1 for o in ORDERS if str(o[1]) == key) for key in printer
        if any(str(o[1]) == key for o in ORDERS)}
    # EXPLAIN of a UNION shows both searches, then the engine.
    steps = _table(query("EXPLAIN SELECT id FROM mindsdb.notes WHERE content = 'printer' "
                         "UNION ALL SELECT id FROM mindsdb.tickets WHERE content = 'x'"))
    assert [(s["step"].split(";")[0], s["source"]) for s in steps] == [
        ("search 1: notes", "mindsdb.notes"), ("search 2: tickets", "mindsdb.tickets"),
        ("engine", "duckdb")]


def test_text_ids_are_cast_as_the_engine_compares_them(query):
    # The leg is cut to the ids as DuckDB casts them, so each row the engine's join keeps
    # is sent (a parse of its own would miss '0x10'), and no more than the cap allows.
    found = _table(query("SELECT d.id, k.id AS kid FROM mindsdb.codes k JOIN pg.big_docs d "
                         "ON d.id = k.id WHERE k.content = 'note'"))
    assert sorted((r["kid"], r["id"]) for r in found) == sorted(CODES.items())


def test_a_subquery_of_the_hits_cuts_the_table_to_their_ids(query):
    # The hits reached through IN (SELECT …) or a subquery in FROM cut pg.big_docs (5 000
    # rows, where a leg may send 500) to their ids, as a direct join does.
    hits = _search(query, "paper stuck in the printer", " LIMIT 3")
    ids = [int(h["id"]) for h in hits]
    for sql in [
        "SELECT d.id, d.title FROM pg.big_docs d WHERE d.id IN (SELECT CAST(id AS INTEGER) "
        "FROM mindsdb.notes WHERE content = 'paper stuck in the printer' LIMIT 3) "
        "AND d.title <> 'x' ORDER BY d.id",
        "SELECT d.id, d.title FROM pg.big_docs d JOIN (SELECT id, relevance FROM "
        "mindsdb.notes WHERE content = 'paper stuck in the printer' LIMIT 3) k "
        "ON k.id = d.id ORDER BY d.id",
        "SELECT d.id, d.title FROM (SELECT n.id AS doc FROM mindsdb.notes n WHERE "
        "n.content = 'paper stuck in the printer' LIMIT 3) AS k LEFT JOIN pg.big_docs d "
        "ON d.id = k.doc ORDER BY d.id",
    ]:
        found = _table(query(sql))
        assert [(r["id"], r["title"]) for r in found] == \
            [(i, f"title {i}") for i in sorted(ids)], sql
        steps = _table(query("EXPLAIN " + sql))
        assert steps[0]["step"].startswith("search 1:"), (sql, steps)
        assert steps[1]["source"] == "pg" and steps[1]["step"].endswith(
            'filtered by the id values of the hits of knowledge base mindsdb.notes: '
            '"d"."id" IN (…)'), (sql, steps)
    # What is no subset of the hits' ids cuts nothing: the whole table comes, and is
    # refused by the cap.
    for sql in [
        "SELECT d.id FROM pg.big_docs d WHERE d.id NOT IN (SELECT CAST(id AS INTEGER) "
        "FROM mindsdb.notes WHERE content = 'printer' LIMIT 3)",
        "SELECT d.id FROM pg.big_docs d WHERE d.id IN (SELECT CAST(id AS INTEGER) + 1 "
        "FROM mindsdb.notes WHERE content = 'printer' LIMIT 3)",
        "SELECT d.id FROM pg.big_docs d WHERE d.id IN (SELECT CAST(id AS INTEGER) "
        "FROM mindsdb.notes WHERE content = 'printer' LIMIT 3) OR d.id < 3",
        "SELECT d.id FROM (SELECT id FROM mindsdb.notes WHERE content = 'printer' "
        "LIMIT 3) k RIGHT JOIN pg.big_docs d ON d.id = k.id",
    ]:
        whole = query(sql)
        assert whole["type"] == "error" and "FEDERATION_MAX_LEG_ROWS" in \
            whole["error_message"], (sql, whole)


def test_metadata_is_the_same_object_in_a_search_and_beside_other_tables(kb_app, query):
    every = {str(i): {"team": team} for i, (_, team) in NOTES.items()}
    plain = _table(query("SELECT * FROM mindsdb.notes WHERE content = 'forgot my password'"))
    assert {r["id"]: r["metadata"] for r in plain} == every
    for sql in [
        # Joined to another source's table, with the hits' own columns or all of them.
        "SELECT kb.id, kb.metadata, c.name FROM mindsdb.notes kb JOIN maria.customers c "
        "ON c.id = kb.id WHERE kb.content = 'forgot my password'",
        "SELECT kb.*, c.name FROM maria.customers c JOIN mindsdb.notes kb ON kb.id = c.id "
        "WHERE kb.content = 'forgot my password' ORDER BY kb.relevance DESC",
        # The engine over the hits alone: a CTE, a UNION of two searches.
        "WITH h AS (SELECT * FROM mindsdb.notes WHERE content = 'forgot my password') "
        "SELECT id, metadata FROM h ORDER BY id",
        "SELECT id, metadata FROM mindsdb.notes WHERE content = 'printer' UNION "
        "SELECT id, metadata FROM mindsdb.notes WHERE content = 'password'",
    ]:
        found = _table(query(sql))
        assert {r["id"]: r["metadata"] for r in found} == every, sql
    # A statement that reads a knowledge base answers one body in every format: JSON
    # (one line of JSON lines), with the object.
    for fmt in ("jsonlines", "csv", "arrow"):
        response = kb_app.test_client().post("/api/sql/query", json={
            "query": "SELECT kb.id, kb.metadata FROM mindsdb.notes kb JOIN maria.customers "
                     "c ON c.id = kb.id WHERE kb.content = 'forgot my password'",
            "response_format": fmt})
        body = json.loads(response.get_data())
        assert {r[0]: r[1] for r in body["data"]} == every, fmt
    # Where the search found a hit and where a LEFT JOIN found none (NULL).
    left = _table(query("SELECT c.id, kb.metadata FROM maria.customers c LEFT JOIN "
                        "mindsdb.notes kb ON kb.id = c.id AND kb.team = 'billing' "
                        "ORDER BY c.id"))
    assert [(r["id"], r["metadata"]) for r in left] == [
        (c[0], {"team": "billing"} if NOTES.get(c[0], ("", ""))[1] == "billing" else None)
        for c in CUSTOMERS]
    # The engine's JSON functions: a field as JSON is its value; the text of the whole as
    # a cast writes it.
    fields = _table(query(
        "SELECT json_extract(kb.metadata, '$.team') AS j, json_extract_string(kb.metadata, "
        "'$.team') AS t, CAST(kb.metadata AS VARCHAR) AS text, json_object('m', "
        "kb.metadata) AS wrapped FROM mindsdb.notes kb JOIN maria.customers c "
        "ON c.id = kb.id WHERE kb.id = 2"))
    assert fields == [{"j": "accounts", "t": "accounts", "text": '{"team":"accounts"}',
                       "wrapped": {"m": {"team": "accounts"}}}]


# PostgreSQL json/jsonb values (as the column's text; None: NULL): objects, arrays, scalars,
# JSON's null, an integer beyond 64 bits.
PROFILES = [
    (1, '{"lang": "fr", "tags": ["a", "b"], "n": 1.5}', '{"b": 1, "a": [true, null]}'),
    (2, '[1, 2, {"x": null}]', '"just text"'),
    (3, '"plain, \\"quoted\\" text"', "123456789012345678901234567890"),
    (4, "null", None),
    (5, None, '{"deep": {"er": "é 🌍"}}'),
    (6, "42", "false"),
]
ONE = "SELECT id, prefs, raw FROM pg.profiles ORDER BY id"
JOINED = ("SELECT p.id, p.prefs, p.raw FROM pg.profiles p JOIN maria.customers c "
          "ON c.id = p.id ORDER BY p.id")


@pytest.fixture(scope="module")
def profiles(fed_sources):
    with _pg(SPLIT_DB) as conn:
        conn.execute("CREATE TABLE profiles (id integer PRIMARY KEY, prefs jsonb, raw json)")
        with conn.cursor() as cur:
            cur.executemany("INSERT INTO profiles VALUES (%s, %s::jsonb, %s::json)", PROFILES)


def test_postgresql_json_columns_answer_the_same_values_alone_and_joined(query, profiles):
    one = query(ONE)
    assert one["type"] == "table", one
    assert [row[1] for row in one["data"]] == [
        {"lang": "fr", "tags": ["a", "b"], "n": 1.5}, [1, 2, {"x": None}],
        'plain, "quoted" text', None, None, 42]
    assert one["data"][2][2] == 123456789012345678901234567890
    joined = query(JOINED)
    assert joined["data"] == one["data"]
    # The engine reads them as JSON: a field of one, the text of another.
    fields = _table(query(
        "SELECT json_extract_string(p.prefs, '$.lang') AS lang, json_extract(p.raw, "
        "'$.deep') AS deep FROM pg.profiles p JOIN maria.customers c ON c.id = p.id "
        "WHERE p.id IN (1, 5) ORDER BY p.id"))
    assert fields == [{"lang": "fr", "deep": None}, {"lang": None, "deep": {"er": "é 🌍"}}]


def _streamed(app, sql: str, fmt: str) -> bytes:
    response = app.test_client().post("/api/sql/query", json={"query": sql,
                                                               "response_format": fmt})
    assert response.status_code == 200, response.get_data(as_text=True)
    assert response.mimetype != "application/json", response.get_data(as_text=True)
    return response.get_data()


def test_postgresql_json_columns_stream_the_same_alone_and_joined(kb_app, profiles):
    # JSON lines: the values; CSV: an object's or an array's JSON text; Arrow: text too
    # (the column's declared type), for the one-source stream and the engine's alike.
    def rows(sql: str) -> list:
        lines = [json.loads(line) for line in
                 _streamed(kb_app, sql, "jsonlines").decode().splitlines()]
        return [row for batch in lines[1:-1] for row in batch]

    assert rows(JOINED) == rows(ONE)
    assert rows(ONE)[0][1] == {"lang": "fr", "tags": ["a", "b"], "n": 1.5}
    csv_one = _streamed(kb_app, ONE, "csv").decode()
    assert _streamed(kb_app, JOINED, "csv").decode() == csv_one
    assert list(csv.reader(io.StringIO(csv_one)))[1] == [  # jsonb orders keys, json not
        "1", '{"n":1.5,"lang":"fr","tags":["a","b"]}', '{"b":1,"a":[true,null]}']
    arrow_one = pa.ipc.open_stream(_streamed(kb_app, ONE, "arrow")).read_all()
    arrow_joined = pa.ipc.open_stream(_streamed(kb_app, JOINED, "arrow")).read_all()
    assert arrow_one.schema.field("prefs").type == pa.string()
    assert arrow_joined.schema.field("prefs").type == pa.string()
    assert arrow_joined.schema.field("raw").type == pa.string()
    assert arrow_joined.column("prefs").to_pylist() == arrow_one.column("prefs").to_pylist()
    assert arrow_joined.column("raw").to_pylist() == arrow_one.column("raw").to_pylist()
    assert arrow_one.column("prefs").to_pylist()[5] == "42"
