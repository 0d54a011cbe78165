"""Parallel deletes of one object, split over two app instances on one store (issue 9, D5).

Each instance has its own connection pool, as two gunicorn workers or two hosts would:
every request looks the object up, then deletes it. Only the request whose DELETE removed
the row may answer 204; the others answer 404, however the lookups and deletes interleave.
"""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers import assert_problem, skill_body
from tests.models.conftest import IRIS_SQL, wait_for

RACERS = 6
ROUNDS = 4  # objects raced for per test: the interleavings differ from round to round


@pytest.fixture
def twins(make_app):
    """Two app instances on this test's store."""
    return make_app(), make_app()


def race_delete(apps, url: str) -> list:
    """DELETE ``url`` from RACERS threads released at once, alternating between the apps."""
    barrier = threading.Barrier(RACERS)

    def send(i: int):
        client = apps[i % len(apps)].test_client()
        barrier.wait()
        return client.delete(url)

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(send, range(RACERS)))


def assert_one_winner(responses) -> None:
    statuses = sorted(r.status_code for r in responses)
    assert statuses == [204] + [404] * (RACERS - 1), statuses
    for response in responses:
        if response.status_code == 404:
            assert_problem(response, 404, "does not exist")


def test_skill_deleted_once(twins):
    client = twins[0].test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    for i in range(ROUNDS):
        assert client.post("/api/projects/p1/skills", json=skill_body(f"s{i}")).status_code == 201
        assert client.post("/api/projects/p1/agents",
                           json={"agent": {"name": f"a{i}", "skills": [f"s{i}"]}}
                           ).status_code == 201
        assert_one_winner(race_delete(twins, f"/api/projects/p1/skills/s{i}"))
        assert client.get(f"/api/projects/p1/skills/s{i}").status_code == 404
        # The agent that used it no longer does (the link went with the skill).
        assert client.get(f"/api/projects/p1/agents/a{i}").get_json()["skills"] == []


def test_skill_deleted_once_by_id(twins):
    client = twins[0].test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    skill_id = client.post("/api/projects/p1/skills", json=skill_body("s1")).get_json()["id"]
    assert_one_winner(race_delete(twins, f"/api/projects/p1/skills/{skill_id}"))
    assert client.get("/api/projects/p1/skills").get_json() == []


def test_agent_deleted_once(twins):
    client = twins[0].test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    for i in range(ROUNDS):
        assert client.post("/api/projects/p1/agents",
                           json={"agent": {"name": f"a{i}"}}).status_code == 201
        # Both published paths: /agents/<name> and the singular /agent/<name>.
        path = "agents" if i % 2 else "agent"
        assert_one_winner(race_delete(twins, f"/api/projects/p1/{path}/a{i}"))
    assert client.get("/api/projects/p1/agents").get_json() == []


def test_project_deleted_once(twins):
    client = twins[0].test_client()
    for i in range(ROUNDS):
        assert client.post("/api/projects", json={"name": f"p{i}"}).status_code == 201
        assert_one_winner(race_delete(twins, f"/api/projects/p{i}"))
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb"]


def test_project_deleted_once_with_cascade(twins):
    client = twins[0].test_client()
    for i in range(ROUNDS):
        assert client.post("/api/projects", json={"name": f"p{i}"}).status_code == 201
        client.post(f"/api/projects/p{i}/skills", json=skill_body("s1"))
        client.post(f"/api/projects/p{i}/agents", json={"agent": {"name": "a1", "skills": ["s1"]}})
        assert_one_winner(race_delete(twins, f"/api/projects/p{i}?cascade=true"))
        assert client.get(f"/api/projects/p{i}/skills").status_code == 404
    assert [p["name"] for p in client.get("/api/projects").get_json()] == ["mindsdb"]


def test_model_deleted_once(twins):
    client = twins[0].test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    # Each round trains a model (the costly part): one raced for by its name, the other by
    # its version (name.1).
    for i in range(2):
        name = f"m{i}"
        response = client.post("/api/projects/p1/models",
                               json={"query": IRIS_SQL.format(name=name)})
        assert response.status_code == 201, response.get_json()
        assert wait_for(client, name)["status"] == "complete"
        ref = f"{name}.1" if i else name
        assert_one_winner(race_delete(twins, f"/api/projects/p1/models/{ref}"))
        assert client.get(f"/api/projects/p1/models/{name}").status_code == 404
