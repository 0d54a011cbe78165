"""Views through HTTP, on SQLite and PostgreSQL stores: CREATE / ALTER / DROP VIEW, SHOW
VIEWS, reading a view (of a data source, of a file, of other views), the checks made when a
view is created, and the object tree mindsdb_sdk lists views with."""

from __future__ import annotations

import sqlite3

import pytest

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD, make_auth_app  # noqa: F401 - a fixture


@pytest.fixture
def client(make_app):
    return make_app(DEMO_SOURCE=True).test_client()


def run(client, query: str, db: str | None = None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def ok(client, query: str, db: str | None = None) -> dict:
    body = run(client, query, db)
    assert body["type"] in ("ok", "table"), body
    return body


def error(client, query: str, *words: str) -> dict:
    body = run(client, query)
    assert body["type"] == "error", body
    for word in words:
        assert word in body["error_message"], body
    return body


def test_a_view_is_read_as_a_table(client):
    ok(client, "CREATE VIEW mindsdb.setosa AS "
               "(SELECT * FROM demo.iris WHERE species = 'setosa')")
    body = ok(client, "SELECT count(*) AS n, max(sepal_length) AS m FROM mindsdb.setosa "
                      "WHERE sepal_length > 5")
    expected = ok(client, "SELECT count(*) AS n, max(sepal_length) AS m FROM demo.iris "
                          "WHERE species = 'setosa' AND sepal_length > 5")
    assert body["data"] == expected["data"] and body["data"][0][0] > 0
    # In the context project, by its bare name, with an alias, joined with its source.
    assert ok(client, "SELECT count(*) FROM setosa s", db="mindsdb")["data"] == [[50]]
    joined = ok(client, "SELECT count(*) FROM mindsdb.setosa s JOIN demo.iris i "
                        "ON i.species = s.species")
    assert joined["data"] == [[2500]]


def test_the_same_statement_reads_a_view_made_after_it_ran_and_none_once_dropped(client):
    """What a statement's text names is kept between runs; whether each name is a view is
    asked at every run: a view created, dropped or replaced by a data source's name in
    between is seen by the next run of the same text."""
    sql = ("SELECT count(*) AS n FROM mindsdb.later l JOIN demo.iris i "
           "ON i.species = l.species")
    error(client, sql, "later")
    ok(client, "CREATE VIEW mindsdb.later AS (SELECT * FROM demo.iris WHERE species = 'setosa')")
    assert ok(client, sql)["data"] == [[2500]]
    ok(client, "CREATE OR REPLACE VIEW mindsdb.later AS "
               "(SELECT * FROM demo.iris WHERE species = 'virginica' AND petal_width > 2)")
    narrower = ok(client, sql)["data"][0][0]
    assert 0 < narrower < 2500
    ok(client, "DROP VIEW mindsdb.later")
    error(client, sql, "later")


def test_the_from_form_of_mindsdb_sdk_and_views_of_views(client):
    # What mindsdb_sdk's views.create(name, sql, database) sends.
    ok(client, "CREATE VIEW counts FROM demo (SELECT species, count(*) AS n FROM iris "
               "GROUP BY species)")
    ok(client, "CREATE VIEW total AS (SELECT sum(n) AS t FROM mindsdb.counts)")
    assert ok(client, "SELECT * FROM mindsdb.counts ORDER BY species")["data"] == [
        ["setosa", 50], ["versicolor", 50], ["virginica", 50]]
    assert ok(client, "SELECT t FROM mindsdb.total")["data"] == [[150]]
    names = ok(client, "SHOW VIEWS")["data"]
    assert [n for n, _ in names] == ["counts", "total"]
    tables = ok(client, "SHOW TABLES FROM mindsdb")["data"]
    assert ["counts"] in tables and ["total"] in tables


def test_a_view_is_checked_when_it_is_created(client):
    error(client, "CREATE VIEW w AS (DELETE FROM demo.iris)", "DELETE")
    error(client, "CREATE VIEW w FROM nowhere (SELECT 1)", "nowhere")
    ok(client, "CREATE VIEW a AS (SELECT 1 AS x)")
    ok(client, "CREATE VIEW b AS (SELECT x FROM mindsdb.a)")
    error(client, "ALTER VIEW a AS (SELECT x FROM mindsdb.b)", "reads itself")
    error(client, "CREATE VIEW c AS (SELECT * FROM mindsdb.c)", "reads itself")
    error(client, "CREATE VIEW a AS (SELECT 2 AS x)", "already exists")
    ok(client, "CREATE VIEW IF NOT EXISTS a AS (SELECT 2 AS x)")
    assert ok(client, "SELECT x FROM mindsdb.b")["data"] == [[1]]
    ok(client, "ALTER VIEW a AS (SELECT 3 AS x)")
    assert ok(client, "SELECT x FROM mindsdb.b")["data"] == [[3]]
    assert [n for n, _ in ok(client, "SHOW VIEWS")["data"]] == ["a", "b"]


def test_create_or_replace_view_creates_then_replaces(client):
    # Not in MindsDB's parser: read as ALTER VIEW, which makes the view when it is missing.
    ok(client, "CREATE OR REPLACE VIEW mindsdb.r AS (SELECT * FROM demo.iris LIMIT 3)")
    assert ok(client, "SELECT count(*) FROM mindsdb.r")["data"] == [[3]]
    ok(client, "create or replace view r from demo (SELECT * FROM iris LIMIT 4)")
    assert ok(client, "SELECT count(*) FROM mindsdb.r")["data"] == [[4]]
    # Checked as CREATE VIEW is, and a refused one leaves the view as it was.
    error(client, "CREATE OR REPLACE VIEW r AS (DELETE FROM demo.iris)", "DELETE")
    error(client, "CREATE OR REPLACE VIEW r AS (SELECT * FROM mindsdb.r)", "reads itself")
    # OR REPLACE with IF NOT EXISTS: a clear refusal, not a syntax error, and nothing changed.
    body = error(client, "CREATE OR REPLACE VIEW IF NOT EXISTS r AS (SELECT 1 AS x)",
                 "IF NOT EXISTS")
    assert "syntax" not in body["error_message"].lower()
    assert ok(client, "SELECT count(*) FROM mindsdb.r")["data"] == [[4]]
    assert [n for n, _ in ok(client, "SHOW VIEWS")["data"]] == ["r"]
    # What a job may run to keep a view current (issue 33's list).
    ok(client, "CREATE JOB refresh (CREATE OR REPLACE VIEW mindsdb.r AS "
               "(SELECT * FROM demo.iris LIMIT 5)) EVERY hour")
    assert ok(client, "SHOW JOBS")["data"][0][0] == "refresh"


def test_drop_view(client):
    ok(client, "CREATE VIEW v AS (SELECT 1 AS x)")
    ok(client, "DROP VIEW v")
    error(client, "DROP VIEW v", "View not found: mindsdb.v")
    ok(client, "DROP VIEW IF EXISTS mindsdb.v")
    assert ok(client, "SHOW VIEWS")["data"] == []


def test_the_object_tree_lists_databases_and_a_projects_models_and_views(client):
    ok(client, "CREATE VIEW v AS (SELECT 1 AS x)")
    tree = client.get("/api/tree/").get_json()
    assert {(n["name"], n["type"]) for n in tree} >= {
        ("information_schema", "system"), ("mindsdb", "project"), ("demo", "data"),
        ("files", "data")}
    assert client.get("/api/tree/mindsdb").get_json() == [
        {"name": "models", "class": "table", "type": "table"},
        {"name": "skills", "class": "table", "type": "table"},
        {"name": "agents", "class": "table", "type": "table"},
        {"name": "jobs", "class": "table", "type": "table"},
        {"name": "jobs_history", "class": "table", "type": "table"},
        {"name": "v", "class": "table", "type": "view"}]
    tables = client.get("/api/tree/demo").get_json()
    assert {"name": "iris", "class": "table", "type": "table"} in tables
    assert client.get("/api/tree/nope").status_code == 404


def test_a_view_never_widens_the_readers_rights(make_auth_app, tmp_path):  # noqa: F811
    app = make_auth_app(DEMO_SOURCE=True, DATA_SOURCES={
        "priv": {"url": f"sqlite:///{_private_db(tmp_path)}"}})
    client = app.test_client()
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        tokens = {n: auth_service.create_token(n, "t")[1] for n in ("root", "alice")}

    def as_user(who: str, query: str) -> dict:
        response = client.post("/api/sql/query", json={"query": query},
                               headers={"Authorization": f"Bearer {tokens[who]}"})
        return response.get_json()

    assert as_user("alice", "CREATE PROJECT pa")["type"] == "ok"
    assert as_user("root", "CREATE VIEW pa.secret AS (SELECT s FROM priv.t)")["type"] == "ok"
    assert as_user("root", "SELECT s FROM pa.secret")["data"] == [["hidden"]]
    # alice owns the project, but may not query the data source: the view reads nothing
    # for her.
    body = as_user("alice", "SELECT s FROM pa.secret")
    assert body["type"] == "error" and "hidden" not in str(body), body
    assert "priv" in body["error_message"]
    # A view alice writes herself over it is refused when it is created.
    body = as_user("alice", "CREATE VIEW pa.mine FROM priv (SELECT * FROM t)")
    assert body["type"] == "error", body


def _private_db(tmp_path) -> str:
    path = tmp_path / "priv.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (s TEXT)")
    conn.execute("INSERT INTO t VALUES ('hidden')")
    conn.commit()
    conn.close()
    return str(path)


def test_views_over_rest_as_mindsdb_namespaces_views(client):
    base = "/api/projects/mindsdb/views"
    created = client.post(base, json={"view": {"name": "v", "query": "SELECT 1 AS x"}})
    assert created.status_code == 201, created.get_data(as_text=True)
    assert created.get_json() == {"name": "v", "query": "SELECT 1 AS x", "database": None}
    assert client.post(base, json={"view": {"name": "v", "query": "SELECT 2"}}
                       ).status_code == 409
    assert client.post(base, json={"view": {"name": "w", "query": "DELETE FROM demo.iris"}}
                       ).status_code == 422
    assert client.post(base, json={"view": {"name": "w", "query": "SELECT * FROM mindsdb.w"}}
                       ).status_code == 422
    assert [v["name"] for v in client.get(base).get_json()] == ["v"]
    changed = client.put(f"{base}/v", json={"view": {"query": "SELECT 3 AS x"}})
    assert changed.status_code == 200 and changed.get_json()["query"] == "SELECT 3 AS x"
    assert client.get(f"{base}/v").get_json()["query"] == "SELECT 3 AS x"
    assert ok(client, "SELECT x FROM mindsdb.v")["data"] == [[3]]
    assert client.delete(f"{base}/v").status_code == 204
    assert client.get(f"{base}/v").status_code == 404
    assert client.put(f"{base}/v", json={"view": {"query": "SELECT 1"}}).status_code == 404
    assert client.get("/api/projects/nope/views").status_code == 404


def test_a_cycle_through_another_project_is_refused_on_both_paths(client):
    # The rule lives in the views service: SQL and REST refuse the same cycle, also when it
    # passes through a view of another project.
    assert client.post("/api/projects", json={"name": "q"}).status_code == 201
    ok(client, "CREATE VIEW q.w AS (SELECT 1 AS x)")
    ok(client, "CREATE VIEW mindsdb.v AS (SELECT x FROM q.w)")
    refused = client.put("/api/projects/q/views/w",
                         json={"view": {"query": "SELECT x FROM mindsdb.v"}})
    assert refused.status_code == 422 and "reads itself" in refused.get_json()["detail"]
    error(client, "ALTER VIEW q.w AS (SELECT x FROM mindsdb.v)", "reads itself")
    assert ok(client, "SELECT x FROM mindsdb.v")["data"] == [[1]]
