"""CREATE / DROP / ALTER / DESCRIBE DATABASE, SHOW DATABASES and SHOW TABLES FROM, through
/api/sql/query, with a real PostgreSQL database — the same rules as /api/databases."""

from __future__ import annotations

import json
import os

import pytest

from .conftest import MARIA_PASSWORD, PG_ROWS, make_sqlite

# The rules are the service's (tested on both stores in test_rest.py): SQLite is enough here.
pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)


def _create(params: dict, name: str = "sales", engine: str = "postgres", extra: str = "") -> str:
    return (f"CREATE DATABASE {extra}{name} WITH ENGINE = '{engine}', "
            f"PARAMETERS = {json.dumps(params)}")


def test_mindsdb_script_over_sql(sql, pg_db, db_client):
    assert sql(_create(pg_db))["type"] == "ok"
    assert sql(_create(pg_db, extra="IF NOT EXISTS "))["type"] == "ok"
    again = sql(_create(pg_db))
    assert again["type"] == "error" and "already exists" in again["error_message"]

    full = sql("SHOW FULL DATABASES")
    assert full["column_names"] == ["Database", "TYPE", "ENGINE"]
    assert ["sales", "data", "postgres"] in full["data"] and ["demo", "data", "sqlite"] \
        in full["data"]
    assert ["sales"] in sql("SHOW DATABASES")["data"]
    assert sql("SHOW TABLES FROM sales")["data"] == [["b_points"], ["points"]]
    described = sql("DESCRIBE DATABASE sales")
    assert described["column_names"] == ["NAME", "TYPE", "ENGINE", "CONNECTION_DATA"]
    name, kind, engine, data = described["data"][0]
    assert (name, kind, engine) == ("sales", "data", "postgres")
    assert json.loads(data) == {**pg_db, "password": "********"}
    assert sql("DESCRIBE sales")["data"] == described["data"]

    assert sql("SELECT count(*) AS n FROM sales.points")["data"] == [[len(PG_ROWS)]]
    assert sql("SELECT * FROM sales.points WHERE id = 2", db=None)["data"][0][:2] == [2, "row 2"]
    model = sql("CREATE MODEL mindsdb.kind_m FROM sales (SELECT x, kind FROM points) "
                "PREDICT kind USING join_learn_process = true, time_budget_s = 1")
    assert model["type"] == "table", model
    predicted = sql("SELECT kind FROM mindsdb.kind_m WHERE x = 3.0")
    assert predicted["type"] == "table" and predicted["data"][0][0] in ("a", "b")

    in_use = sql("DROP DATABASE sales")
    assert in_use["type"] == "error" and "kind_m" in in_use["error_message"]
    assert sql("DROP MODEL mindsdb.kind_m")["type"] == "ok"
    assert sql("DROP DATABASE sales")["type"] == "ok"
    assert sql("DROP DATABASE IF EXISTS sales")["type"] == "ok"
    missing = sql("DROP DATABASE sales")
    assert missing["type"] == "error"
    assert db_client.get("/api/databases/sales").status_code == 404


def test_create_database_without_engine_is_a_project(sql, db_client):
    assert sql("CREATE DATABASE plain_p")["type"] == "ok"
    assert db_client.get("/api/projects/plain_p").status_code == 200
    assert sql("DROP DATABASE plain_p")["type"] == "ok"
    assert db_client.get("/api/projects/plain_p").status_code == 404


def test_bad_statements_change_nothing(sql, db_client, pg_db):
    before = db_client.get("/api/databases").get_json()
    for statement, words in (
            (_create({"host": "h"}, engine="oracle"), ["oracle"]),
            (_create({"host": "127.0.0.1", "user": "u"}), ["database"]),
            (_create({**pg_db, "port": "x"}), ["port"]),
            (_create({**pg_db, "port": 1}), ["connect"]),
            (_create({"db_file": "/etc/passwd"}, engine="sqlite"), ["db_file"]),
            (_create(pg_db, name="information_schema"), ["name"]),
            (_create(pg_db, name="mindsdb"), ["project"])):
        answer = sql(statement)
        assert answer["type"] == "error", (statement, answer)
        for word in words:
            assert word in answer["error_message"], (statement, answer)
    assert db_client.get("/api/databases").get_json() == before


def test_alter_database_and_create_or_replace(sql, maria_db):
    wrong = {**maria_db, "password": "wrong"}
    refused = sql(_create(wrong, name="garden", engine="mariadb"))
    assert refused["type"] == "error" and "connect" in refused["error_message"].lower()
    assert sql(_create(maria_db, name="garden", engine="mariadb"))["type"] == "ok"
    assert sql("SELECT count(*) FROM garden.flowers")["data"] == [[3]]
    # A wrong password is checked before it replaces the right one.
    altered = sql(f"ALTER DATABASE garden PARAMETERS = {json.dumps(wrong)}")
    assert altered["type"] == "error"
    assert sql("SELECT count(*) FROM garden.flowers")["data"] == [[3]]
    replaced = sql(_create(maria_db, name="garden", engine="mariadb",
                           extra="").replace("CREATE", "CREATE OR REPLACE", 1))
    assert replaced["type"] == "ok", replaced
    assert MARIA_PASSWORD not in json.dumps(sql("SELECT * FROM information_schema.databases"))
    assert sql("DROP DATABASE garden")["type"] == "ok"


def test_postgres_schema_parameter(sql, pg_db):
    """``schema`` is where bare table names resolve (MindsDB's postgres handler does the same)."""
    assert sql(_create({**pg_db, "schema": "archive"}, name="old"))["type"] == "ok"
    assert sql("SHOW TABLES FROM old")["data"] == [["old_points"]]
    assert sql("SELECT count(*) FROM old.old_points")["data"] == [[2]]
    assert sql("DROP DATABASE old")["type"] == "ok"


def test_use_answers_the_new_context(sql, db_client):
    """USE x (MindsDB's way of setting the context): ok, x in the answer's context; the
    client sends it back, and bare names then resolve in x."""
    make_sqlite(os.path.join(db_client.application.instance_path, "used.db"), rows=2)
    assert sql(_create({"db_file": "used.db"}, name="Used", engine="sqlite"))["type"] == "ok"
    assert sql("CREATE PROJECT proj_u")["type"] == "ok"
    for statement, db in (("USE demo", "demo"), ("use used", "Used"), ("USE `Used`", "Used"),
                          ("USE PROJ_U", "proj_u"), ("USE mindsdb", "mindsdb"),
                          ("USE information_schema", "information_schema"),
                          ("USE files", "files")):
        answer = sql(statement, db="mindsdb")
        assert answer.pop("query_id")
        assert answer == {"type": "ok", "column_names": [], "context": {"db": db}}, statement
    assert sql("SELECT count(*) FROM t", db="Used")["data"] == [[2]]
    names = sql("SELECT name FROM databases", db="information_schema")
    assert ["Used"] in names["data"], names

    for statement, code, word in (("USE nowhere", 17, "'nowhere' does not exist"),
                                  ("USE demo.iris", 19, "demo.iris"),
                                  ("USE 'demo'", 1, "expected a name")):
        answer = sql(statement)
        assert answer["type"] == "error" and answer["error_code"] == code, answer
        assert word in answer["error_message"], answer
