"""API.md §5: agents, at /api/projects/… and at the unprefixed /projects/…."""

import pytest

from tests.helpers import assert_problem, skill_body

RECORD_KEYS = {"id", "name", "project_id", "model_name", "provider", "params", "skills",
               "skills_extra_parameters", "model", "data", "prompt_template", "created_at",
               "updated_at"}


@pytest.fixture
def p1(client):
    client.post("/api/projects", json={"name": "p1"})
    for name in ("s1", "s2", "s3"):
        assert client.post("/api/projects/p1/skills", json=skill_body(name)).status_code == 201
    return "p1"


def create(client, **agent):
    return client.post("/api/projects/p1/agents", json={"agent": agent})


@pytest.mark.parametrize("prefix", ["/api", ""])
def test_create_and_read_back(client, p1, prefix):
    response = client.post(f"{prefix}/projects/p1/agents", json={"agent": {
        "name": "a1", "model_name": "gpt-4o", "provider": "openai",
        "skills": ["s1", {"name": "S2", "parameters": {"limit": 5}}],
        "params": {"temperature": 0.1, "openai_api_key": "sk-1"},
        "model": {"model_name": "gpt-4o", "api_key": "sk-2"}, "data": {"tables": ["t"]},
        "prompt_template": "Answer: {{question}}"}})
    assert response.status_code == 201, response.get_json()
    record = response.get_json()
    assert set(record) == RECORD_KEYS
    assert record["name"] == "a1" and record["model_name"] == "gpt-4o"
    assert record["provider"] == "openai"
    assert record["params"] == {"temperature": 0.1, "openai_api_key": "********"}
    assert record["model"] == {"model_name": "gpt-4o", "api_key": "********"}
    assert record["data"] == {"tables": ["t"]}
    assert record["prompt_template"] == "Answer: {{question}}"
    assert [s["name"] for s in record["skills"]] == ["s1", "s2"]
    assert record["skills"][0]["agent_ids"] == [record["id"]]
    assert record["skills_extra_parameters"] == {"s1": {}, "s2": {"limit": 5}}
    for ref in ("a1", "A1", str(record["id"])):
        assert client.get(f"{prefix}/projects/p1/agents/{ref}").get_json() == record
    assert client.get(f"{prefix}/projects/p1/agents").get_json() == [record]
    assert "sk-1" not in client.get("/api/projects/p1/agents").get_data(as_text=True)


def test_minimal_agent(client, p1):
    record = create(client, name="a2").get_json()
    assert record["skills"] == [] and record["params"] == {}
    assert record["model_name"] is None


def test_name_taken_is_409(client, p1):
    assert create(client, name="a1").status_code == 201
    assert_problem(create(client, name="A1"), 409, "A1")
    assert len(client.get("/api/projects/p1/agents").get_json()) == 1


def test_unknown_skill_is_422_and_creates_nothing(client, p1):
    # 422, not 404: the project exists; a skill the body names does not.
    assert_problem(create(client, name="a1", skills=["s1", "nope"]), 422, "nope")
    assert client.get("/api/projects/p1/agents").get_json() == []


def test_mindsdb_provider_needs_a_model_of_the_project(client, p1):
    assert_problem(create(client, name="a1", provider="mindsdb", model_name="m_none"),
                   422, "m_none")
    assert client.get("/api/projects/p1/agents").get_json() == []
    # Other providers name external models, which Quarry does not check.
    assert create(client, name="a1", provider="openai", model_name="m_none").status_code == 201


@pytest.mark.parametrize("body, word", [
    ({"name": "a1"}, "agent"),
    ({"agent": {}}, "name"),
    ({"agent": {"name": "a1", "skills": "s1"}}, "skills"),
    ({"agent": {"name": "a1", "skills": [1]}}, "skills"),
    ({"agent": {"name": "a1", "skills": [{"parameters": {}}]}}, "name"),
    ({"agent": {"name": "a1", "params": []}}, "params"),
    ({"agent": {"name": "a1", "model_name": 5}}, "model_name"),
    ({"agent": {"name": "a1", "bogus": 1}}, "bogus"),
])
def test_bad_bodies_are_400(client, p1, body, word):
    assert_problem(client.post("/api/projects/p1/agents", json=body), 400, word)
    assert client.get("/api/projects/p1/agents").get_json() == []


def test_missing_project_and_agent_are_404(client, p1):
    assert_problem(client.get("/api/projects/nope/agents"), 404, "nope")
    assert_problem(client.post("/api/projects/nope/agents", json={"agent": {"name": "a"}}),
                   404, "nope")
    assert_problem(client.get("/api/projects/p1/agents/nope"), 404, "nope")
    assert_problem(client.put("/api/projects/p1/agents/nope", json={"agent": {}}), 404, "nope")
    assert_problem(client.delete("/api/projects/p1/agents/nope"), 404, "nope")


def test_put_keeps_null_fields_and_merges_params(client, p1):
    create(client, name="a1", model_name="gpt-4o", provider="openai", skills=["s1"],
           params={"temperature": 0.1, "max_tokens": 10, "api_key": "sk-1"},
           prompt_template="t1")
    # What mindsdb_sdk sends: every field, unchanged ones as null.
    response = client.put("/api/projects/p1/agents/a1", json={"agent": {
        "name": None, "model_name": None, "provider": None, "skills_to_add": None,
        "skills_to_remove": None, "data": None, "model": None, "prompt_template": None,
        "params": {"temperature": 0.5, "max_tokens": None, "top_p": 1,
                   "api_key": "********"}}})
    assert response.status_code == 200
    record = response.get_json()
    assert record["model_name"] == "gpt-4o" and record["prompt_template"] == "t1"
    assert record["params"] == {"temperature": 0.5, "api_key": "********", "top_p": 1}
    assert [s["name"] for s in record["skills"]] == ["s1"]
    from app.extensions import db
    from app.services.agents import agent_for_use
    from app.store import Agent

    with client.application.test_request_context():
        # Kept, encrypted: the row holds the mask, the agent's model is called with the key.
        assert db.session.scalars(db.select(Agent)).one().params["api_key"] == "********"
        assert agent_for_use("p1", "a1")["params"]["api_key"] == "sk-1"


def test_put_skills_replace_add_and_remove(client, p1):
    create(client, name="a1", skills=["s1", "s2"])
    replaced = client.put("/api/projects/p1/agents/a1", json={"agent": {"skills": ["s3", "s1"]}})
    assert [s["name"] for s in replaced.get_json()["skills"]] == ["s3", "s1"]
    added = client.put("/api/projects/p1/agents/a1", json={"agent": {
        "skills_to_add": [{"name": "s2", "parameters": {"k": 1}}]}})
    assert [s["name"] for s in added.get_json()["skills"]] == ["s3", "s1", "s2"]
    assert added.get_json()["skills_extra_parameters"]["s2"] == {"k": 1}
    removed = client.put("/projects/p1/agents/a1", json={"agent": {
        "skills_to_remove": ["S3", "s1"]}})
    assert [s["name"] for s in removed.get_json()["skills"]] == ["s2"]
    assert_problem(client.put("/api/projects/p1/agents/a1",
                              json={"agent": {"skills_to_add": ["nope"]}}), 422, "nope")
    assert [s["name"] for s in client.get("/api/projects/p1/agents/a1").get_json()["skills"]] \
        == ["s2"]


def test_put_renames_and_refuses_a_taken_name(client, p1):
    create(client, name="a1")
    create(client, name="a2")
    assert_problem(client.put("/api/projects/p1/agents/a1", json={"agent": {"name": "A2"}}),
                   409, "A2")
    renamed = client.put("/api/projects/p1/agents/a1", json={"agent": {"name": "a9"}})
    assert renamed.status_code == 200 and renamed.get_json()["name"] == "a9"
    assert sorted(a["name"] for a in client.get("/api/projects/p1/agents").get_json()) \
        == ["a2", "a9"]


def test_put_bad_fields_are_400_and_change_nothing(client, p1):
    before = create(client, name="a1", params={"x": 1}).get_json()
    for body in ({"agent": {"params": "x"}}, {"agent": {"name": "1bad"}}, {"params": {}},
                 {"agent": {"skills_to_add": "s1"}}):
        assert_problem(client.put("/api/projects/p1/agents/a1", json=body), 400)
    assert client.get("/api/projects/p1/agents/a1").get_json() == before


@pytest.mark.parametrize("path", ["/api/projects/p1/agents/{}", "/api/projects/p1/agent/{}",
                                  "/projects/p1/agents/{}", "/projects/p1/agent/{}"])
def test_delete_at_every_published_path(client, p1, path):
    agent = create(client, name="a1", skills=["s1"]).get_json()
    assert client.delete(path.format("A1")).status_code == 204
    assert client.get("/api/projects/p1/agents").get_json() == []
    assert client.get("/api/projects/p1/skills/s1").get_json()["agent_ids"] == []
    assert_problem(client.delete(path.format(agent["id"])), 404)


def test_changing_only_skills_moves_updated_at(client, p1):
    before = create(client, name="a1", skills=["s1"]).get_json()
    after = client.put("/api/projects/p1/agents/a1",
                       json={"agent": {"skills_to_add": ["s2"]}}).get_json()
    assert after["updated_at"] > before["updated_at"]
    assert after["created_at"] == before["created_at"]
