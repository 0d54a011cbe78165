"""POST /api/sql/query: names, types, params, truncation, errors, request validation."""

from __future__ import annotations

import base64
import json
import threading
import time
from decimal import Decimal

import pytest

from app.sql.errors import ErrorCode, SqlError
from app.sql.execute import fetch_rows

from ..helpers import assert_problem
from .conftest import _pg_admin

# --- names and the demo source ------------------------------------------------------------

def test_select_constant_answers_like_mindsdb(query):
    body = query("SELECT 1")
    assert body.pop("query_id")  # Quarry's addition: the statement's id
    assert body == {"type": "table", "column_names": ["1"], "data": [[1]],
                    "context": {"db": "mindsdb"}}


def test_demo_tables_have_the_documented_columns(query):
    expected = {
        "iris": ["sepal_length", "sepal_width", "petal_length", "petal_width", "species"],
        "diabetes": ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6",
                     "progression"],
    }
    for table, columns in expected.items():
        body = query(f"SELECT * FROM demo.{table} LIMIT 1")
        assert body["column_names"] == columns
    assert query("SELECT DISTINCT species FROM demo.iris ORDER BY 1")["data"] == [
        ["setosa"], ["versicolor"], ["virginica"]]
    wine = query("SELECT * FROM demo.wine LIMIT 1")["column_names"]
    assert wine[0] == "alcohol" and "od280_od315_of_diluted_wines" in wine
    assert wine[-1] == "cultivar"
    cancer = query("SELECT diagnosis, count(*) FROM demo.breast_cancer GROUP BY 1 ORDER BY 1")
    assert cancer["data"] == [["benign", 357], ["malignant", 212]]
    # raw, unscaled diabetes: ages in years
    assert query("SELECT min(age) >= 18, max(age) <= 80 FROM demo.diabetes")["data"] == [[1, 1]]
    cancer_columns = query("SELECT * FROM demo.breast_cancer LIMIT 1")["column_names"]
    assert cancer_columns[0] == "mean_radius" and cancer_columns[-1] == "diagnosis"
    for column in (*wine, *cancer_columns):
        assert column == column.lower() and column.replace("_", "").isalnum()


def test_qualified_and_context_names_resolve_to_the_source(query):
    qualified = query("SELECT count(*) AS n FROM demo.iris")
    bare = query("SELECT count(*) AS n FROM iris", db="demo")
    assert qualified["data"] == bare["data"] == [[150]]
    assert qualified["context"] == bare["context"] == {"db": "demo"}
    joined = query("SELECT demo.iris.species FROM demo.iris JOIN demo.iris AS b "
                   "ON demo.iris.sepal_length = b.sepal_length LIMIT 1")
    assert joined["type"] == "table", joined
    assert query("SELECT n FROM pg.public.big WHERE n = 7")["data"] == [[7]]
    assert query("SELECT n FROM public.big WHERE n = 8", db="pg")["data"] == [[8]]
    assert query("WITH c AS (SELECT 2 AS x) SELECT x FROM c")["data"] == [[2]]
    assert query("SELECT `n` FROM maria.`big` WHERE n = 9")["data"] == [[9]]


def test_context_db_in_the_answer(query):
    assert query("SELECT 1", db="p1")["context"] == {"db": "p1"}
    assert query("SELECT 1", db="lite")["context"] == {"db": "lite"}


def test_two_sources_in_one_statement_are_joined(query):
    # Federated SELECT (tests/federation/ holds its own tests); every PostgreSQL type of
    # pg.items goes through the engine.
    body = query("SELECT * FROM demo.iris JOIN pg.items ON 1 = 1")
    assert body["type"] == "table", body
    iris = query("SELECT count(*) FROM demo.iris")["data"][0][0]
    assert len(body["data"]) == iris * 3


@pytest.mark.parametrize(("sql", "db", "code", "words"), [
    ("SELECT * FROM nope.t", None, ErrorCode.UNKNOWN_SOURCE, ["nope", "demo"]),
    ("SELECT * FROM iris", None, ErrorCode.UNKNOWN_TABLE, ["iris"]),
    ("SELECT * FROM demo.nope", None, ErrorCode.UNKNOWN_TABLE, ["no such table: nope"]),
    ("SELECT * FROM nope", "pg", ErrorCode.UNKNOWN_TABLE, ["nope", "does not exist"]),
    ("SELECT * FROM nope", "maria", ErrorCode.UNKNOWN_TABLE, ["nope", "doesn't exist"]),
    ("SELEC 1", None, ErrorCode.SYNTAX, ["line 1, column 1", "did you mean SELECT"]),
    ("SELECT 1; SELECT 2", None, ErrorCode.MULTIPLE_STATEMENTS, ["one sql statement"]),
    ("SELECT nocolumn FROM items", "pg", ErrorCode.QUERY_FAILED, ["nocolumn"]),
    ("SELECT 1 / 0 AS x FROM items", "pg", ErrorCode.QUERY_FAILED, ["division by zero"]),
])
def test_errors_have_a_stable_code_and_the_drivers_message(query, sql, db, code, words):
    body = query(sql, db=db)
    assert body["type"] == "error", body
    assert body["error_code"] == code, body
    assert body["column_names"] == [] and "context" in body
    for word in words:
        assert word.lower() in body["error_message"].lower(), body
    assert "[SQL:" not in body["error_message"] and "Traceback" not in body["error_message"]


# --- types ------------------------------------------------------------------------------------

def _row(query, db, sql):
    body = query(sql, db=db)
    assert body["type"] == "table", body
    return dict(zip(body["column_names"], body["data"][0], strict=True)), body


def test_postgresql_types_round_trip(query, sql_app):
    row, body = _row(query, "pg", "SELECT * FROM items WHERE id = 1")
    assert row["price"] == 1.5 and row["ok"] is True and row["f"] == 0.1
    assert row["d"] == "2024-02-29" and row["t"] == "13:45:30.500000"
    assert row["ts"] == "2024-02-29T13:45:30.250000"
    assert row["tstz"] == "2024-02-29T11:45:30+00:00"
    assert row["span"] == "P1DT2H3M4.5S"
    assert base64.b64decode(row["raw"]) == b"\x00\xff\x10"
    assert row["uid"] == "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    assert row["doc"] == {"k": [1, 2.5, None]} and row["js"] == {"j": "v"}
    assert row["tags"] == ["a", "b"] and row["nums"] == [1, 2, 3]
    assert row["addr"] == "192.168.0.1" and row["spot"] == "(1,2)"  # fallback: text
    # Decimal is exact in the JSON text itself, not rounded through a float.
    raw = sql_app.test_client().post("/api/sql/query", json={
        "query": "SELECT big FROM items WHERE id = 1", "context": {"db": "pg"}}).get_data()
    parsed = json.loads(raw, parse_float=Decimal)
    assert parsed["data"][0][0] == Decimal("12345678901234567890.123456789012")
    nan_row, _ = _row(query, "pg", "SELECT f, span FROM items WHERE id = 2")
    assert nan_row == {"f": None, "span": "-PT3H"}
    inf_row, _ = _row(query, "pg", "SELECT f, big FROM items WHERE id = 3")
    assert inf_row == {"f": None, "big": -0.5}
    special, _ = _row(query, "pg", "SELECT 'NaN'::numeric AS n, NULL::int AS z, "
                                   "ARRAY['-Infinity'::float8, 1.5] AS a")
    assert special == {"n": None, "z": None, "a": [None, 1.5]}


def test_mariadb_types_round_trip(query):
    row, _ = _row(query, "maria", "SELECT * FROM items WHERE id = 1")
    assert row["price"] == 1.5 and row["ok"] == 1 and row["f"] == 0.1
    assert row["big"] == 12345678901234567890.123456789012
    assert row["d"] == "2024-02-29" and row["t"] == "PT13H45M30.5S"
    assert row["ts"] == "2024-02-29T13:45:30.250000"
    assert base64.b64decode(row["raw"]) == b"\x00\xff\x10"
    assert json.loads(row["doc"]) == {"k": [1, 2.5, None]}
    row2, _ = _row(query, "maria", "SELECT t, price FROM items WHERE id = 2")
    assert row2 == {"t": "-PT3H", "price": None}


def test_sqlite_types_round_trip(query):
    row, _ = _row(query, "lite", "SELECT id, name, f, raw, NULL AS n FROM items WHERE id = 1")
    assert row == {"id": 1, "name": "apple", "f": 0.1, "raw": "AP8Q", "n": None}


# --- params -----------------------------------------------------------------------------------

@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_params_bind_named_placeholders(query, db):
    body = query("SELECT id, name, '100%' AS p FROM items WHERE name = :name OR id = :id "
                 "ORDER BY id", db=db, params={"name": "pear", "id": 3})
    assert body["data"] == [[2, "pear", "100%"], [3, "fig", "100%"]], body
    evil = "x' OR '1'='1"
    assert query("SELECT id FROM items WHERE name = :n", db=db, params={"n": evil})["data"] == []
    assert query("SELECT ':n' AS literal", db=db, params={})["data"] == [[":n"]]


@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_a_missing_param_is_named(query, db):
    body = query("SELECT id FROM items WHERE name = :who AND id = :id", db=db,
                 params={"id": 1})
    assert body["type"] == "error" and body["error_code"] == ErrorCode.MISSING_PARAMETER
    assert ":who" in body["error_message"] and ":id" not in body["error_message"]


# --- truncation and size ----------------------------------------------------------------------

@pytest.mark.parametrize("db", ["pg", "maria", "lite"])
def test_row_cap_truncates_and_says_so(make_app, sources, db):
    capped = {name: {"url": url, "max_rows": 100} for name, url in sources.items()}
    client = make_app(DATA_SOURCES=capped).test_client()

    def run(sql):
        return client.post("/api/sql/query", json={"query": sql, "context": {"db": db}}
                           ).get_json()

    body = run("SELECT n FROM big ORDER BY n")
    assert body["truncated"] is True and len(body["data"]) == 100
    assert body["data"][-1] == [100]
    exact = run("SELECT n FROM big ORDER BY n LIMIT 100")
    assert len(exact["data"]) == 100 and "truncated" not in exact
    assert run("SELECT count(*) FROM big")["data"] == [[250]]  # the source still works


def test_response_size_cap(make_app, sources):
    client = make_app(DATA_SOURCES=sources, SQL_MAX_RESPONSE_BYTES=2000).test_client()
    body = client.post("/api/sql/query", json={"query": "SELECT * FROM lite.big"}).get_json()
    assert body["type"] == "error" and body["error_code"] == ErrorCode.RESPONSE_TOO_LARGE
    small = client.post("/api/sql/query", json={"query": "SELECT n FROM lite.big LIMIT 3"})
    assert small.get_json()["data"] == [[1], [2], [3]]


# --- sources that are down or busy ------------------------------------------------------------

def test_a_source_that_is_down_answers_error_and_others_work(make_app, sources):
    down = {**sources, "pgdown": "postgresql://postgres@127.0.0.1:1/x",
            "mariadown": "mysql://root@127.0.0.1:1/x", "litedown": "sqlite:////nonexistent/x.db"}
    client = make_app(DATA_SOURCES=down).test_client()
    for name in ("pgdown", "mariadown", "litedown"):
        started = time.monotonic()
        body = client.post("/api/sql/query", json={"query": "SELECT 1", "context": {"db": name}}
                           ).get_json()
        assert body["type"] == "error" and body["error_code"] == ErrorCode.SOURCE_DOWN, body
        assert name in body["error_message"]
        assert time.monotonic() - started < 3
    for name in ("pg", "maria", "lite", "demo"):
        body = client.post("/api/sql/query", json={"query": "SELECT 1 AS one",
                                                    "context": {"db": name}}).get_json()
        assert body["data"] == [[1]], body


def test_a_busy_source_answers_busy_after_the_pool_wait(make_app, sources, pg_source):
    app = make_app(DATA_SOURCES=sources, SQL_POOL_SIZE=1, SQL_POOL_TIMEOUT_S=0.3)
    client = app.test_client()
    slow_answer: dict = {}
    slow = threading.Thread(target=lambda: slow_answer.update(client.post(
        "/api/sql/query", json={"query": "SELECT pg_sleep(2.5)", "context": {"db": "pg"}}
    ).get_json()))
    slow.start()
    # Until the slow statement holds the pool's one connection, running in PostgreSQL
    # (however long the request took to get there on a busy machine).
    with _pg_admin(pg_source["db"]) as admin:
        deadline = time.monotonic() + 10
        while not admin.execute("SELECT count(*) FROM pg_stat_activity WHERE state = 'active' "
                                "AND query ILIKE '%pg_sleep(2.5)%' AND pid <> pg_backend_pid()"
                                ).fetchone()[0]:
            assert time.monotonic() < deadline, slow_answer
            time.sleep(0.02)
    started = time.monotonic()
    body = client.post("/api/sql/query", json={"query": "SELECT 1", "context": {"db": "pg"}}
                       ).get_json()
    waited = time.monotonic() - started  # not counting the slow request's own end
    slow.join()
    assert slow_answer["type"] == "table", slow_answer
    assert body["type"] == "error" and body["error_code"] == ErrorCode.BUSY, body
    assert waited < 1.0
    assert client.post("/api/sql/query", json={"query": "SELECT 1 AS a", "context": {
        "db": "pg"}}).get_json()["data"] == [[1]]


# --- request validation -----------------------------------------------------------------------

@pytest.mark.parametrize(("payload", "field"), [
    ({}, "query"),
    ({"querry": "SELECT 1"}, "query"),
    ({"query": ""}, "query"),
    ({"query": 123}, "query"),
    ({"query": "SELECT 1", "context": "x"}, "context"),
    ({"query": "SELECT 1", "context": {"db": 5}}, "db"),
    ({"query": "SELECT 1", "params": [1]}, "params"),
    ({"query": "SELECT 1", "params": {"a": {"b": 1}}}, "params"),
    ({"query": "SELECT 1", "timeout_s": -1}, "timeout_s"),
    (["SELECT 1"], "json"),
])
def test_bad_requests_are_400_problems(sql_app, payload, field):
    response = sql_app.test_client().post("/api/sql/query", json=payload)
    assert_problem(response, 400, field if field != "json" else "")


def test_non_json_body_is_400(sql_app):
    response = sql_app.test_client().post("/api/sql/query", data="SELECT 1",
                                          content_type="application/json")
    assert_problem(response, 400)


def test_unknown_keys_in_context_and_body_are_ignored(query):
    body = query("SELECT 1", context={"db": "demo", "show_secrets": False}, extra=1)
    assert body["type"] == "table" and body["context"] == {"db": "demo"}


# --- fetch_rows (used to train models) -----------------------------------------------------------

def test_fetch_rows_reads_through_the_same_gate(sql_app):
    with sql_app.app_context():
        columns, rows = fetch_rows("demo", "SELECT species, count(*) AS n FROM iris "
                                           "GROUP BY species ORDER BY 1", max_rows=10)
        assert columns == ["species", "n"] and rows[0] == ("setosa", 50)
        assert fetch_rows("pg", "SELECT id FROM items ORDER BY id", max_rows=3)[1] == [
            (1,), (2,), (3,)]
        for sql, code in [("DELETE FROM iris", ErrorCode.READ_ONLY),
                          ("SELECT * FROM iris", ErrorCode.TOO_MANY_ROWS),
                          ("SELECT * FROM nope", ErrorCode.UNKNOWN_TABLE)]:
            with pytest.raises(SqlError) as caught:
                fetch_rows("demo", sql, max_rows=100)
            assert caught.value.code == code
        with pytest.raises(SqlError) as caught:
            fetch_rows("nosuch", "SELECT 1", max_rows=1)
        assert caught.value.code == ErrorCode.UNKNOWN_SOURCE
        with pytest.raises(SqlError) as caught:
            fetch_rows("pg", "SELECT pg_sleep(3)", max_rows=1, timeout_s=0.3)
        assert caught.value.code == ErrorCode.TIME_LIMIT


def test_sources_describe_names_and_engines(sql_app):
    from app.sql import data_source_names
    from app.sql.sources import current_sources

    with sql_app.app_context():
        assert data_source_names() == ["demo", "files", "lite", "maria", "pg", "pgsuper"]
        assert dict(current_sources().describe()) == {
            "demo": "sqlite", "files": "files", "lite": "sqlite", "maria": "mysql",
            "pg": "postgresql", "pgsuper": "postgresql"}
