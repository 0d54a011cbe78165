"""Predictions answer the target's own values, and an unseen input value flags its row
instead of failing the batch — on PostgreSQL, MariaDB and SQLite sources (issue 26).

Every column of the tables is text: targets that read like booleans ('yes'/'no') or numbers
('007'), and an input of numeric text ('4', '6', '8') that a new row fills with 'rotary'.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3

import numpy as np
import pymysql
import pytest
from sqlalchemy import create_engine

from tests.conftest import MARIADB_URL, fresh_store_url, pg_database
from tests.helpers import assert_problem
from tests.models.conftest import create

ROWS = 120
MARIA_DB = f"quarry_own_values_{os.getpid()}"


def _rows() -> list[tuple]:
    rng = np.random.default_rng(3)
    out = []
    for i in range(ROWS):
        cyl = str(rng.choice(["4", "6", "8"]))
        hp = round(float(rng.normal(100, 20)), 1)
        # Simple enough that any candidate learns it, whichever the budget lets run.
        survived = "yes" if hp > 100 + (5 if cyl == "8" else 0) else "no"
        code = "007" if hp > 100 else "012"
        out.append((i, cyl, hp, code, survived))
    return out


NEW_ROWS = [(1000, "rotary", 90.0, "007", "yes"), (1001, "4", 95.0, "012", "yes"),
            (1002, "8", 130.0, "007", "yes")]
TABLES = ("CREATE TABLE cars (n INTEGER, cyl VARCHAR(10), hp FLOAT, code VARCHAR(5), "
          "survived VARCHAR(5))",
          "CREATE TABLE newcars (n INTEGER, cyl VARCHAR(10), hp FLOAT, code VARCHAR(5), "
          "survived VARCHAR(5))",
          "CREATE TABLE nocyl (n INTEGER, hp FLOAT, code VARCHAR(5))")


def _fill(execute) -> None:
    for statement in TABLES:
        execute(statement, None)
    for table, rows in (("cars", _rows()), ("newcars", NEW_ROWS)):
        for row in rows:
            execute(f"INSERT INTO {table} VALUES (%s, %s, %s, %s, %s)", row)
    execute("INSERT INTO nocyl VALUES (%s, %s, %s)", (1, 90.0, "007"))


@pytest.fixture(scope="module")
def source_urls(tmp_path_factory):
    """{"pg": url, "maria": url, "lite": url}: the same tables on each kind of database."""
    path = str(tmp_path_factory.mktemp("own") / "own.db")
    conn = sqlite3.connect(path)
    _fill(lambda sql, params: conn.execute(sql.replace("%s", "?"), params or ()))
    conn.commit()
    conn.close()
    maria = pymysql.connect(host="127.0.0.1", port=3306, user="root", autocommit=True,
                            ssl_disabled=True)
    with contextlib.closing(maria), maria.cursor() as cur:
        cur.execute(f"DROP DATABASE IF EXISTS `{MARIA_DB}`")
        cur.execute(f"CREATE DATABASE `{MARIA_DB}`")
        cur.execute(f"USE `{MARIA_DB}`")
        _fill(cur.execute)
    with pg_database("quarry_own_values") as pg_url:
        engine = create_engine(pg_url)
        with engine.begin() as pg:
            raw = pg.connection.driver_connection
            _fill(lambda sql, params: raw.execute(sql, params))
        engine.dispose()
        try:
            yield {"pg": pg_url, "maria": f"{MARIADB_URL.rsplit('/', 1)[0]}/{MARIA_DB}",
                   "lite": f"sqlite:///{path}"}
        finally:
            maria = pymysql.connect(host="127.0.0.1", port=3306, user="root",
                                    autocommit=True, ssl_disabled=True)
            with contextlib.closing(maria), maria.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{MARIA_DB}`")


@pytest.fixture(params=["sqlite"])
def store_url(request, tmp_path) -> str:
    # The store plays no part in what is checked here: one kind keeps the suite short.
    return fresh_store_url(request, tmp_path)


def _sql(client, query: str) -> dict:
    response = client.post("/api/sql/query", json={"query": query})
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def _table(client, query: str) -> list[dict]:
    body = _sql(client, query)
    assert body["type"] == "table", body
    return [dict(zip(body["column_names"], row, strict=True)) for row in body["data"]]


@pytest.mark.parametrize("kind", ["pg", "maria", "lite"])
def test_text_target_and_unseen_inputs(make_app, source_urls, kind):
    client = make_app(DATA_SOURCES={"src": source_urls[kind]}).test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    made = create(client, "CREATE MODEL p1.m FROM src (SELECT cyl, hp, code, survived FROM "
                          "cars) PREDICT survived USING join_learn_process = true, "
                          "time_budget_s = 2")
    assert made.status_code == 201, made.get_json()

    # describe names the target's values as the rows held them.
    features = {f["column"]: f for f in client.get(
        "/api/projects/p1/models/m/describe", json={"attribute": "features"}).get_json()}
    assert features["survived"]["values"] == ["no", "yes"]
    assert features["survived"]["source_type"] == "text"
    assert features["cyl"]["source_type"] == "text"

    # The JOIN answers 'yes'/'no' (they were true/false), so filtering on them finds rows.
    found = _table(client, "SELECT t.n, m.survived FROM src.cars AS t JOIN p1.m AS m "
                           "WHERE m.survived = 'yes'")
    assert found and {r["survived"] for r in found} == {"yes"}
    every = _table(client, "SELECT m.survived FROM src.cars AS t JOIN p1.m AS m")
    assert {r["survived"] for r in every} == {"yes", "no"}

    # 'rotary' in a column trained on '4', '6', '8' was a 422 for the whole JOIN.
    answered = _table(client, "SELECT t.n, t.cyl, m.survived, m.survived_explain "
                              "FROM src.newcars AS t JOIN p1.m AS m ORDER BY t.n")
    assert [r["n"] for r in answered] == [1000, 1001, 1002]
    assert all(r["survived"] in ("yes", "no") for r in answered)
    flags = [json.loads(r["survived_explain"]).get("unknown_inputs") for r in answered]
    assert flags[0] == {"cyl": "'rotary' is not a number"}
    assert flags[1] is None and flags[2] is None

    # REST predict: the same, and a category not seen in training is flagged too.
    rest = client.post("/api/projects/p1/models/m/predict", json={"data": [
        {"cyl": "rotary", "hp": 90.0, "code": "007"}, {"cyl": "4", "hp": 150.0, "code": "012"}]})
    assert rest.status_code == 200, rest.get_json()
    first, second = rest.get_json()
    assert first["survived"] in ("yes", "no") and second["survived"] == "yes"
    assert json.loads(first["survived_explain"])["unknown_inputs"] == {
        "cyl": "'rotary' is not a number"}

    # A table without an input column is a wrong shape: the JOIN fails, naming it.
    wrong = _sql(client, "SELECT * FROM src.nocyl AS t JOIN p1.m AS m")
    assert wrong["type"] == "error" and "cyl" in wrong["error_message"], wrong


def test_codes_with_leading_zeros_and_numeric_text_come_back_as_text(make_app, source_urls):
    client = make_app(DATA_SOURCES={"src": source_urls["pg"]}).test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    for name, target in (("c", "code"), ("k", "cyl")):
        made = create(client, f"CREATE MODEL p1.{name} FROM src (SELECT cyl, hp, code, "
                              f"survived FROM cars) PREDICT {target} USING "
                              "join_learn_process = true, time_budget_s = 2")
        assert made.status_code == 201, made.get_json()
    # '007' came back as 7, and '4' as the number 4.
    codes = _table(client, "SELECT t.code AS held, m.code FROM src.cars AS t JOIN p1.c AS m")
    assert {r["code"] for r in codes} == {"007", "012"}
    assert sum(r["code"] == r["held"] for r in codes) >= 0.9 * ROWS
    cyl = client.post("/api/projects/p1/models/k/predict",
                      json={"data": [{"hp": 90.0, "code": "007", "survived": "yes"}]})
    assert cyl.status_code == 200 and cyl.get_json()[0]["cyl"] in ("4", "6", "8")
    # 'yes'/'no' as an input is read as true/false; another word is flagged, not refused.
    odd = client.post("/api/projects/p1/models/k/predict",
                      json={"data": [{"hp": 90.0, "code": "007", "survived": "maybe"}]})
    assert odd.status_code == 200, odd.get_json()
    unknown = json.loads(odd.get_json()[0]["cyl_explain"])["unknown_inputs"]
    assert unknown == {"survived": "'maybe' is not a boolean"}
    assert_problem(client.post("/api/projects/p1/models/k/predict", json={"data": 3}),
                   400, "data")
