"""Size limits of request bodies (MAX_BODY_BYTES, MAX_DATA_BODY_BYTES) and of a skill's or an
agent's params (PARAMS_MAX_BYTES): 413 problem documents that say the limit, nothing stored."""

from __future__ import annotations

import json

import pytest
import requests

from app.rules.params import params_size
from tests.helpers import assert_problem, skill_body
from tests.live import quarry_env, serving, sqlite_store

PARAMS_LIMIT = 64 * 1024  # the default QUARRY_PARAMS_MAX_BYTES
BODY_LIMIT = 1024 * 1024  # the default QUARRY_MAX_BODY_BYTES
TWO_MB = "x" * (2 * 1024 * 1024)


def snapshot(client) -> dict:
    return {kind: client.get(f"/api/projects/p1/{kind}").get_json()
            for kind in ("skills", "agents")}


@pytest.fixture
def seeded(client):
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    assert client.post("/api/projects/p1/skills", json=skill_body("s1")).status_code == 201
    assert client.post("/api/projects/p1/agents",
                       json={"agent": {"name": "a1", "params": {"k": "v"}}}).status_code == 201
    return snapshot(client)


def _blob(size: int) -> dict:
    """Params whose compact JSON encoding is exactly ``size`` bytes."""
    params = {"blob": "x" * (size - params_size({"blob": ""}))}
    assert params_size(params) == size
    return params


def test_params_up_to_the_limit_are_stored(client, seeded):
    body = {"skill": {"name": "s2", "type": "retrieval", "params": _blob(PARAMS_LIMIT)}}
    assert client.post("/api/projects/p1/skills", json=body).status_code == 201
    agent = {"agent": {"name": "a2", "params": _blob(PARAMS_LIMIT)}}
    assert client.post("/api/projects/p1/agents", json=agent).status_code == 201


@pytest.mark.parametrize("method, url, body", [
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "retrieval", "params": _blob(PARAMS_LIMIT + 1)}}),
    ("PUT", "/api/projects/p1/skills/s1", {"skill": {"params": _blob(PARAMS_LIMIT + 1)}}),
    ("PUT", "/api/projects/p1/skills/s3",
     {"skill": {"type": "retrieval", "params": _blob(PARAMS_LIMIT + 1)}}),
    ("POST", "/api/projects/p1/agents", {"agent": {"name": "a2",
                                                    "params": _blob(PARAMS_LIMIT + 1)}}),
    ("PUT", "/api/projects/p1/agents/a1", {"agent": {"params": _blob(PARAMS_LIMIT + 1)}}),
    # Multi-byte characters count as the bytes they take.
    ("POST", "/api/projects/p1/skills",
     {"skill": {"name": "s2", "type": "retrieval", "params": {"t": "é" * PARAMS_LIMIT}}}),
])
def test_params_over_the_limit_are_413(client, seeded, method, url, body):
    response = client.open(url, method=method, json=body)
    problem = assert_problem(response, 413, "params", str(PARAMS_LIMIT))
    assert problem["limit"] == PARAMS_LIMIT and problem["size"] > PARAMS_LIMIT
    assert snapshot(client) == seeded


def test_updates_cannot_grow_params_past_the_limit(client, seeded):
    # Each update is small, but params are merged: the merged params are what is measured.
    half = "x" * (PARAMS_LIMIT // 2)
    url = "/api/projects/p1/agents/a1"
    assert client.put(url, json={"agent": {"params": {"a": half}}}).status_code == 200
    before = snapshot(client)
    assert_problem(client.put(url, json={"agent": {"params": {"b": half}}}), 413, "agent 'a1'")
    assert snapshot(client) == before


def test_params_limit_holds_in_sql_too(client, seeded):
    blob = "x" * PARAMS_LIMIT
    answer = client.post("/api/sql/query", json={
        "query": f"CREATE SKILL p1.big USING type = 'retrieval', source = '{blob}'"}).get_json()
    assert answer["type"] == "error" and answer["error_code"] == 19, answer
    assert str(PARAMS_LIMIT) in answer["error_message"]
    assert snapshot(client) == seeded


def test_two_megabytes_of_params_are_refused_by_the_body_limit(client, seeded):
    body = {"skill": {"name": "s2", "type": "retrieval", "params": {"blob": TWO_MB}}}
    assert_problem(client.post("/api/projects/p1/skills", json=body), 413, str(BODY_LIMIT))
    body = {"agent": {"name": "a2", "params": {"blob": TWO_MB}}}
    assert_problem(client.post("/api/projects/p1/agents", json=body), 413, str(BODY_LIMIT))
    assert snapshot(client) == seeded


def test_data_routes_take_larger_bodies(client):
    # A statement's parameter values and a batch of rows to predict are data, not settings.
    answer = client.post("/api/sql/query", json={"query": "SELECT length(:a) AS n",
                                                  "params": {"a": TWO_MB}})
    assert answer.status_code == 200 and answer.get_json()["data"] == [[len(TWO_MB)]]
    rows = [{"sepal_length": 5.1, "note": "x" * 1000} for _ in range(2048)]
    response = client.post("/api/projects/mindsdb/models/nope/predict", json={"data": rows})
    assert_problem(response, 404, "nope")  # read whole, then the model is not found


def test_data_body_limit_is_a_setting(make_app):
    client = make_app(MAX_DATA_BODY_BYTES=1000, MAX_BODY_BYTES=100_000).test_client()
    answer = client.post("/api/sql/query", json={"query": "SELECT length(:a) AS n",
                                                  "params": {"a": "x" * 2000}})
    assert_problem(answer, 413, "1000")
    # Other routes keep MAX_BODY_BYTES.
    body = skill_body("s2", blob="x" * 2000)
    assert client.post("/api/projects/mindsdb/skills", json=body).status_code == 201


# --- through gunicorn ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def live(tmp_path_factory, session_dir, sqlite_template):
    tmp = tmp_path_factory.mktemp("limits")
    env = quarry_env(QUARRY_DATABASE_URL=sqlite_store(sqlite_template, tmp),
                     QUARRY_DEMO_PATH=f"{session_dir}/demo.db", QUARRY_INSTANCE_PATH=str(tmp),
                     QUARRY_WORKERS="1", QUARRY_THREADS="2", QUARRY_PRELOAD_ML="false")
    with serving(env, tmp) as server:
        assert requests.post(server.url + "/api/projects", json={"name": "p1"},
                             timeout=10).status_code == 201
        yield server.url


def _chunks(data: bytes, size: int = 64 * 1024):
    for start in range(0, len(data), size):
        yield data[start:start + size]


@pytest.mark.slow
@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
def test_gunicorn_answers_an_oversize_body_with_a_problem_document(live, chunked):
    data = json.dumps({"skill": {"name": "s2", "type": "t",
                                 "params": {"blob": TWO_MB}}}).encode()
    response = requests.post(live + "/api/projects/p1/skills",
                             data=_chunks(data) if chunked else data,
                             headers={"Content-Type": "application/json"}, timeout=30)
    assert response.status_code == 413, response.text
    assert response.headers["Content-Type"] == "application/problem+json"
    problem = response.json()
    assert problem["status"] == 413 and str(BODY_LIMIT) in problem["detail"]
    params = {"skill": {"name": "s2", "type": "t", "params": _blob(PARAMS_LIMIT + 1)}}
    response = requests.post(live + "/api/projects/p1/skills", json=params, timeout=30)
    assert response.status_code == 413 and "params" in response.json()["detail"]
    # The connection and the worker are fine afterwards; nothing was stored.
    assert requests.get(live + "/api/projects/p1/skills", timeout=10).json() == []
