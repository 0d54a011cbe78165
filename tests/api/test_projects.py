"""API.md §2: projects."""

import logging
import sqlite3

import pytest

from app.sql.errors import ErrorCode
from tests.helpers import assert_problem, skill_body


def test_default_project_exists(client):
    response = client.get("/api/projects")
    assert response.status_code == 200
    names = [p["name"] for p in response.get_json()]
    assert names == ["mindsdb"]
    record = response.get_json()[0]
    assert set(record) == {"name", "id", "created_at"}
    assert record["created_at"].endswith("+00:00")


def test_trailing_slash_lists_too(client):
    assert client.get("/api/projects/").status_code == 200


def test_create_get_and_case_insensitive_lookup(client):
    created = client.post("/api/projects", json={"name": "Sales"})
    assert created.status_code == 201
    assert created.get_json()["name"] == "Sales"
    for ref in ("Sales", "sales", "SALES"):
        got = client.get(f"/api/projects/{ref}")
        assert got.status_code == 200
        assert got.get_json() == created.get_json()


def test_create_taken_name_is_409_case_insensitively(client):
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    assert_problem(client.post("/api/projects", json={"name": "P1"}), 409, "p1", "exists")
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb", "p1"]


def test_create_bad_names(client):
    for bad in ["", "1abc", "a" * 64, "a b", "a/b", "naïve", "a'b", 'a"b', "a.b"]:
        assert_problem(client.post("/api/projects", json={"name": bad}), 400, "name")
    for bad in [None, 1, [], {}, True]:
        assert_problem(client.post("/api/projects", json={"name": bad}), 400, "name")
    assert len(client.get("/api/projects").get_json()) == 1


def test_get_missing_project_is_404(client):
    assert_problem(client.get("/api/projects/nope"), 404, "nope")


def test_delete_empty_project(client):
    client.post("/api/projects", json={"name": "p1"})
    response = client.delete("/api/projects/p1")
    assert response.status_code == 204 and response.data == b""
    assert_problem(client.get("/api/projects/p1"), 404)
    assert_problem(client.delete("/api/projects/p1"), 404, "p1")


def test_delete_default_project_is_409(client):
    assert_problem(client.delete("/api/projects/mindsdb"), 409, "mindsdb")
    assert_problem(client.delete("/api/projects/MindsDB"), 409, "mindsdb")
    assert client.get("/api/projects/mindsdb").status_code == 200


def test_delete_non_empty_project_is_409_listing_contents(client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    body = assert_problem(client.delete("/api/projects/p1"), 409, "s1", "a1", "cascade")
    assert body["contents"] == {"skills": ["s1"], "agents": ["a1"]}
    assert client.get("/api/projects/p1/skills/s1").status_code == 200


def test_delete_with_cascade_removes_contents(client):
    client.post("/api/projects", json={"name": "p1"})
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    assert client.delete("/api/projects/p1?cascade=true").status_code == 204
    assert_problem(client.get("/api/projects/p1/skills"), 404)
    # A new project of the same name starts empty.
    client.post("/api/projects", json={"name": "p1"})
    assert client.get("/api/projects/p1/skills").get_json() == []
    assert client.get("/api/projects/p1/agents").get_json() == []


def test_delete_cascade_flag_must_be_boolean(client):
    client.post("/api/projects", json={"name": "p1"})
    assert_problem(client.delete("/api/projects/p1?cascade=maybe"), 400, "cascade")
    assert client.get("/api/projects/p1").status_code == 200


def _sql(client, query: str) -> dict:
    response = client.post("/api/sql/query", json={"query": query})
    assert response.status_code == 200
    return response.get_json()


def test_project_may_not_take_a_data_source_name_on_rest_or_sql(make_app, tmp_path):
    """Projects and data sources are both databases in SQL: one name space, one rule (in the
    service), the same 409 on both paths."""
    warehouse = tmp_path / "warehouse.db"
    sqlite3.connect(warehouse).close()
    client = make_app(DATA_SOURCES={"Warehouse": f"sqlite:///{warehouse}"}).test_client()
    for name in ("demo", "DEMO", "warehouse"):
        body = assert_problem(client.post("/api/projects", json={"name": name}), 409,
                              name, "data source")
        assert body["title"] == "Name reserved"
        for statement in (f"CREATE PROJECT {name}", f"CREATE PROJECT IF NOT EXISTS {name}",
                          f"CREATE DATABASE {name}"):
            answer = _sql(client, statement)
            assert answer["type"] == "error", (statement, answer)
            assert answer["error_code"] == ErrorCode.CONFLICT, answer
            assert name in answer["error_message"]
    # information_schema, SQL's catalogue, is taken by the system database: a name of the
    # documented shape (the body's pattern allows it), so 409 as for any taken name, not 400.
    for name in ("information_schema", "Information_Schema"):
        assert_problem(client.post("/api/projects", json={"name": name}), 409,
                       name, "system database")
        answer = _sql(client, f"CREATE PROJECT {name}")
        assert answer["error_code"] == ErrorCode.CONFLICT, answer
        assert name in answer["error_message"]
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb"]
    # SQL still reaches the data source by that name.
    answer = _sql(client, "SHOW SKILLS FROM demo")
    assert answer["error_code"] == ErrorCode.UNSUPPORTED and "data source" in \
        answer["error_message"]


def test_data_source_may_not_take_a_reserved_name(make_app):
    for name in ("mindsdb", "MindsDB", "information_schema"):
        with pytest.raises(RuntimeError, match=f"'{name}' is reserved"):
            make_app(DATA_SOURCES={name: "sqlite://"})


def test_start_warns_of_a_project_a_new_data_source_hides(make_app, tmp_path, caplog):
    first = make_app().test_client()
    assert first.post("/api/projects", json={"name": "sales"}).status_code == 201
    sales = tmp_path / "sales.db"
    sqlite3.connect(sales).close()
    caplog.set_level(logging.WARNING, logger="app")
    client = make_app(DATA_SOURCES={"sales": f"sqlite:///{sales}"}).test_client()
    assert "project(s) sales have the name of a data source" in caplog.text
    # REST still reaches the project; SQL reaches the data source.
    assert client.get("/api/projects/sales").status_code == 200
    answer = _sql(client, "SHOW SKILLS FROM sales")
    assert answer["error_code"] == ErrorCode.UNSUPPORTED
