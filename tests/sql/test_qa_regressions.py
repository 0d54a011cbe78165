"""Regressions found by black-box QA of POST /api/sql/query (data path and MindsDB clients)."""

from __future__ import annotations

import time

import pytest

from app.sql.errors import ErrorCode

SETOSA_SQL = "SELECT * FROM demo.iris WHERE species = 'setosa' LIMIT 2"


def test_pg_values_python_cannot_hold_come_back_as_text(query):
    # psycopg cannot make a date of 'infinity' or of a year BC, nor a timedelta of 10^8
    # years: the statement used to fail as if the source were down (SOURCE_DOWN).
    answer = query("SELECT 'infinity'::date AS d, '-infinity'::timestamp AS ts, "
                   "'infinity'::timestamptz AS tz, '0044-03-15 BC'::date AS bc, "
                   "interval '100000000 years' AS iv, ARRAY['infinity'::date] AS arr, "
                   "'2024-02-29'::date AS ok", db="pg")
    assert answer["type"] == "table", answer
    assert answer["data"] == [["infinity", "-infinity", "infinity", "0044-03-15 BC",
                               "100000000 years", ["infinity"], "2024-02-29"]]


def test_a_value_the_driver_refuses_is_a_query_error_not_a_source_down(query):
    # sqlite3 cannot bind an integer beyond 64 bits. (A NUL character, which psycopg
    # refuses, no longer gets this far: request bodies may not hold NUL at all, see
    # tests/api/test_hostile_input.py.)
    answer = query("SELECT :v AS v", db="lite", params={"v": 2**64})
    assert answer["type"] == "error" and answer["error_code"] == ErrorCode.OUT_OF_RANGE, answer
    assert "too large" in answer["error_message"]
    assert query("SELECT 1 AS one", db="lite")["data"] == [[1]]  # the source is still fine


@pytest.mark.parametrize("sql", ["SELECT $1", "SELECT $1::int + 1 FROM pg.items"])
def test_pg_positional_placeholder_is_refused_like_question_mark(query, sql):
    answer = query(sql, db="pg" if "pg." not in sql else None)
    assert answer["error_code"] == ErrorCode.MISSING_PARAMETER, answer
    assert "$1" in answer["error_message"]


def test_a_tiny_timeout_still_limits_mariadb(query):
    # max_statement_time = 0.000 would mean "no limit at all" to MariaDB.
    started = time.monotonic()
    answer = query("SELECT SLEEP(2) AS s", db="maria", timeout_s=0.0001)
    assert answer["error_code"] == ErrorCode.TIME_LIMIT, answer
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize("source", ["demo", "pg", "maria", "lite"])
def test_show_tables_of_a_data_source_lists_its_tables(query, source):
    # mindsdb_sdk's server.databases.get(src).tables.list() sends SHOW TABLES in context src.
    expected = {"demo": ["breast_cancer", "diabetes", "iris", "wine"]}.get(source,
                                                                          ["big", "items"])
    answer = query("SHOW TABLES", db=source)
    assert answer["type"] == "table", answer
    assert answer["column_names"] == [f"Tables_in_{source}"]
    assert answer["data"] == [[name] for name in expected]
    answer = query(f"SHOW TABLES FROM {source} LIKE 'i%'")
    assert answer["data"] == [[name] for name in expected if name.startswith("i")]


def test_native_query_on_a_project_joined_with_a_model(client):
    # mindsdb_sdk's model.predict(server.query(sql)) sends ``mindsdb (sql) AS t``: the SQL
    # names its own data source.
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    created = client.post("/api/sql/query", json={
        "query": "CREATE MODEL p1.iris FROM demo (SELECT * FROM iris) PREDICT species "
                 "USING join_learn_process = true, time_budget_s = 1"}).get_json()
    assert created["type"] == "table", created
    answer = client.post("/api/sql/query", json={
        "query": f"SELECT m.* FROM mindsdb ({SETOSA_SQL}) AS t JOIN p1.iris AS m"}).get_json()
    assert answer["type"] == "table", answer
    assert len(answer["data"]) == 2
    assert answer["column_names"][:5] == ["sepal_length", "sepal_width", "petal_length",
                                          "petal_width", "species"]
    answer = client.post("/api/sql/query", json={
        "query": "SELECT m.* FROM mindsdb (SELECT 1 AS a) AS t JOIN p1.iris AS m"}).get_json()
    assert answer["error_code"] == ErrorCode.UNKNOWN_SOURCE, answer


def test_openapi_documents_what_the_sql_endpoint_refuses(client):
    # schemathesis sent params {"x": {}} and timeout_s 0.0 as schema-valid and got 400.
    schema = client.get("/api/openapi.json").get_json()["components"]["schemas"]["SqlQueryIn"]
    values = schema["properties"]["params"]["additionalProperties"]
    assert {"type": "object"} not in values["oneOf"] and values["nullable"] is True
    assert {v["type"] for v in values["oneOf"]} == {"string", "number", "boolean"}
    assert schema["properties"]["timeout_s"]["exclusiveMinimum"] is True
    assert client.post("/api/sql/query", json={"query": "SELECT 1", "timeout_s": 0.0}
                       ).status_code == 400
