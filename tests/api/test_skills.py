"""API.md §4: skills, at /api/projects/… and at the unprefixed /projects/…."""

import pytest

from tests.helpers import assert_problem, skill_body

PREFIXES = ["/api", ""]


@pytest.fixture
def p1(client):
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    return "p1"


@pytest.mark.parametrize("prefix", PREFIXES)
def test_create_and_read_back(client, p1, prefix):
    base = f"{prefix}/projects/p1/skills"
    created = client.post(base, json=skill_body("s1", source="kb1", description="d"))
    assert created.status_code == 201
    record = created.get_json()
    assert set(record) == {"id", "name", "project_id", "type", "params", "agent_ids",
                           "created_at", "updated_at"}
    assert record["name"] == "s1" and record["type"] == "retrieval"
    assert record["params"] == {"source": "kb1", "description": "d"}
    assert record["agent_ids"] == []
    project_id = client.get("/api/projects/p1").get_json()["id"]
    assert record["project_id"] == project_id
    for ref in ("s1", "S1", str(record["id"])):
        got = client.get(f"{base}/{ref}")
        assert got.status_code == 200 and got.get_json() == record
    assert client.get(base).get_json() == [record]


def test_sql_skill_on_a_data_source(client, p1):
    body = {"skill": {"name": "q", "type": "sql",
                      "params": {"database": "demo", "tables": ["iris"], "description": "x"}}}
    assert client.post("/api/projects/p1/skills", json=body).status_code == 201


@pytest.mark.parametrize("params, word", [
    ({"tables": ["iris"]}, "database"),
    ({"database": "nowhere", "tables": ["iris"]}, "nowhere"),
    ({"database": "demo"}, "tables"),
    ({"database": "demo", "tables": "iris"}, "tables"),
    ({"database": "demo", "tables": [1]}, "tables"),
])
def test_sql_skill_params_are_checked(client, p1, params, word):
    # The body has the documented shape; what a sql skill's params must hold is checked
    # after that: 422, not 400.
    body = {"skill": {"name": "q", "type": "sql", "params": params}}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 422, word)
    assert client.get("/api/projects/p1/skills").get_json() == []


def test_name_taken_is_409_case_insensitively(client, p1):
    assert client.post("/api/projects/p1/skills", json=skill_body("s1")).status_code == 201
    assert_problem(client.post("/api/projects/p1/skills", json=skill_body("S1")), 409, "S1")
    assert len(client.get("/api/projects/p1/skills").get_json()) == 1


def test_same_name_in_two_projects(client, p1):
    client.post("/api/projects", json={"name": "p2"})
    assert client.post("/api/projects/p1/skills", json=skill_body("s1")).status_code == 201
    assert client.post("/api/projects/p2/skills", json=skill_body("s1")).status_code == 201


@pytest.mark.parametrize("missing", ["name", "type", "params"])
def test_missing_field_is_400_naming_it(client, p1, missing):
    body = skill_body("s1")
    del body["skill"][missing]
    assert_problem(client.post("/api/projects/p1/skills", json=body), 400, missing)


def test_missing_wrapper_is_400(client, p1):
    body = {"name": "s1", "type": "retrieval", "params": {}}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 400, "skill")


def test_missing_project_is_404(client):
    assert_problem(client.post("/api/projects/nope/skills", json=skill_body("s1")), 404, "nope")
    assert_problem(client.get("/api/projects/nope/skills"), 404, "nope")
    assert_problem(client.get("/api/projects/nope/skills/s1"), 404, "nope")
    assert_problem(client.put("/api/projects/nope/skills/s1", json={"skill": {}}), 404, "nope")
    assert_problem(client.delete("/api/projects/nope/skills/s1"), 404, "nope")


def test_get_missing_skill_is_404(client, p1):
    assert_problem(client.get("/api/projects/p1/skills/nope"), 404, "nope")
    assert_problem(client.get("/api/projects/p1/skills/12345"), 404, "12345")


def test_put_merges_params_and_null_deletes_a_key(client, p1):
    client.post("/api/projects/p1/skills", json=skill_body("s1", source="kb", description="d"))
    put = client.put("/api/projects/p1/skills/s1",
                     json={"skill": {"params": {"source": "kb2", "extra": 1}}})
    assert put.status_code == 200
    assert put.get_json()["params"] == {"source": "kb2", "description": "d", "extra": 1}
    put = client.put("/api/projects/p1/skills/s1", json={"skill": {"params": {"extra": None}}})
    assert put.get_json()["params"] == {"source": "kb2", "description": "d"}
    assert client.get("/api/projects/p1/skills/s1").get_json()["params"] == put.get_json()["params"]


def test_put_changes_type_and_keeps_nulls(client, p1):
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    put = client.put("/api/projects/p1/skills/s1",
                     json={"skill": {"name": None, "type": "knowledge_base", "params": None}})
    assert put.status_code == 200
    record = put.get_json()
    assert record["type"] == "knowledge_base" and record["name"] == "s1"
    assert record["params"] == {"source": "kb"}
    assert record["updated_at"] >= record["created_at"]


def test_put_renames_and_refuses_a_taken_name(client, p1):
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/skills", json=skill_body("s2"))
    renamed = client.put("/api/projects/p1/skills/s1", json={"skill": {"name": "s1r"}})
    assert renamed.status_code == 200 and renamed.get_json()["name"] == "s1r"
    assert_problem(client.get("/api/projects/p1/skills/s1"), 404)
    assert_problem(client.put("/api/projects/p1/skills/s1r", json={"skill": {"name": "S2"}}),
                   409, "S2")
    names = sorted(s["name"] for s in client.get("/api/projects/p1/skills").get_json())
    assert names == ["s1r", "s2"]


def test_put_on_missing_skill_creates_it_with_the_path_name(client, p1):
    body = {"skill": {"name": "ignored", "type": "retrieval", "params": {"source": "x"}}}
    created = client.put("/api/projects/p1/skills/s3", json=body)
    assert created.status_code == 201
    assert created.get_json()["name"] == "s3"
    assert client.get("/api/projects/p1/skills/s3").status_code == 200
    assert_problem(client.get("/api/projects/p1/skills/ignored"), 404)


def test_put_on_missing_skill_with_incomplete_body_is_422(client, p1):
    # Valid as an update; only because there is no such skill to update is "type" missing.
    assert_problem(client.put("/api/projects/p1/skills/s4", json={"skill": {"params": {}}}),
                   422, "type")
    assert client.get("/api/projects/p1/skills").get_json() == []


def test_put_on_missing_id_is_404(client, p1):
    body = {"skill": {"type": "retrieval", "params": {}}}
    assert_problem(client.put("/api/projects/p1/skills/999", json=body), 404, "999")


def test_delete(client, p1):
    skill = client.post("/api/projects/p1/skills", json=skill_body("s1")).get_json()
    assert client.delete("/api/projects/p1/skills/S1").status_code == 204
    assert_problem(client.delete("/api/projects/p1/skills/s1"), 404, "s1")
    client.post("/api/projects/p1/skills", json=skill_body("s2"))
    other = client.get("/api/projects/p1/skills/s2").get_json()
    assert client.delete(f"/projects/p1/skills/{other['id']}").status_code == 204
    assert client.get("/api/projects/p1/skills").get_json() == []
    # The name is free again.
    recreated = client.post("/api/projects/p1/skills", json=skill_body("s1"))
    assert recreated.status_code == 201 and recreated.get_json()["id"] != skill["id"]


def test_delete_leaves_the_agents_that_used_it(client, p1):
    client.post("/api/projects/p1/skills", json=skill_body("s1"))
    client.post("/api/projects/p1/skills", json=skill_body("s2"))
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1", "s2"]}})
    assert client.delete("/api/projects/p1/skills/s1").status_code == 204
    agent = client.get("/api/projects/p1/agents/a1").get_json()
    assert [s["name"] for s in agent["skills"]] == ["s2"]
    assert agent["skills_extra_parameters"] == {"s2": {}}


def test_list_filtered_by_agent(client, p1):
    for name in ("s1", "s2", "s3"):
        client.post("/api/projects/p1/skills", json=skill_body(name))
    a1 = client.post("/api/projects/p1/agents",
                     json={"agent": {"name": "a1", "skills": ["s1", "s3"]}}).get_json()
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a2", "skills": ["s3"]}})
    by_id = client.get(f"/api/projects/p1/skills?agent_id={a1['id']}").get_json()
    assert [s["name"] for s in by_id] == ["s1", "s3"]
    by_name = client.get("/projects/p1/skills?agent=A2").get_json()
    assert [s["name"] for s in by_name] == ["s3"]
    assert sorted(by_id[1]["agent_ids"]) == sorted([a1["id"], a1["id"] + 1])
    assert len(client.get("/api/projects/p1/skills").get_json()) == 3
    assert_problem(client.get("/api/projects/p1/skills?agent=nope"), 404, "nope")
    assert_problem(client.get("/api/projects/p1/skills?agent_id=999"), 404, "999")
    assert_problem(client.get("/api/projects/p1/skills?agent_id=x"), 400, "agent_id")


def test_secret_params_are_write_only(client, p1):
    body = skill_body("s1", source="kb", api_key="sk-123", nested={"db_password": "pw"})
    created = client.post("/api/projects/p1/skills", json=body).get_json()
    assert created["params"] == {"source": "kb", "api_key": "********",
                                 "nested": {"db_password": "********"}}
    raw = client.get("/api/projects/p1/skills/s1").get_data(as_text=True)
    assert "sk-123" not in raw and "pw" not in raw
    # A client echoing what it read back does not overwrite the secret with the mask.
    client.put("/api/projects/p1/skills/s1",
               json={"skill": {"params": {"api_key": "********", "source": "kb2"}}})
    from app.extensions import db
    from app.services.credentials import opened_fields
    from app.store import Skill

    with client.application.app_context():
        stored = db.session.scalars(db.select(Skill)).one()
        # Kept encrypted: the row holds the mask, its token the secrets.
        assert stored.params["api_key"] == "********" and stored.params["source"] == "kb2"
        assert opened_fields({"params": stored.params}, stored.secrets)["params"] == {
            "source": "kb2", "api_key": "sk-123", "nested": {"db_password": "pw"}}


def test_timestamps_are_iso_8601_utc_on_every_store(client, p1):
    from datetime import UTC, datetime, timedelta

    created = client.post("/api/projects/p1/skills", json=skill_body("s1")).get_json()
    client.post("/api/projects/p1/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
    listed = client.get("/api/projects/p1/skills").get_json()[0]
    agent = client.get("/api/projects/p1/agents/a1").get_json()
    for stamp in (created["created_at"], listed["updated_at"], agent["created_at"],
                  agent["skills"][0]["created_at"]):
        parsed = datetime.fromisoformat(stamp)
        assert parsed.utcoffset() == timedelta(0), stamp
        assert abs(datetime.now(UTC) - parsed) < timedelta(minutes=5)
    assert listed["created_at"] == created["created_at"]
