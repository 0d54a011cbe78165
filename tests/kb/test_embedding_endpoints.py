"""Knowledge bases on an OpenAI-compatible /v1/embeddings endpoint: only the endpoints an
administrator listed (QUARRY_EMBEDDING_ENDPOINTS) are called, the key is encrypted at rest
and never shown, and a failing endpoint is named (never its key) with nothing of the batch
kept. The endpoint is a real HTTP server in the test, speaking /v1/embeddings."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from app.extensions import db
from app.store import KnowledgeBase
from tests.helpers import sql_runner

from .scripted import endpoint_pair

KEY = "sk-very-secret"


def _letters(text: str) -> list[float]:
    """A toy embedding: how often each letter a-z occurs."""
    return [float(text.lower().count(chr(97 + i))) + 0.01 for i in range(26)]


def _embeddings(body: dict) -> tuple[int, dict | None]:
    if any("boom" in text for text in body["input"]):
        return 500, None
    return 200, {"object": "list", "model": body["model"], "data": [
        {"object": "embedding", "index": i, "embedding": _letters(text)}
        for i, text in enumerate(body["input"])]}


@pytest.fixture(scope="module")
def endpoints():
    """Two servers: the first is listed, the second is not."""
    with endpoint_pair(_embeddings) as pair:
        yield pair


def run(client, query: str) -> dict:
    return sql_runner(client)(query)


def using(base_url: str) -> str:
    return (f"CREATE KNOWLEDGE_BASE mindsdb.ext USING embedding_model = {{'provider': "
            f"'openai', 'model_name': 'toy', 'base_url': '{base_url}', 'api_key': '{KEY}'}}")


def test_a_listed_endpoint_embeds_and_its_key_stays_hidden(make_app, tmp_path, endpoints):
    (listed, unlisted), (server, other) = endpoints
    server.calls.clear()
    other.calls.clear()
    app = make_app(EMBEDDING_ENDPOINTS=f"{listed}/", KB_DIR=str(tmp_path / "kb"),
                   ENCRYPTION_KEY=Fernet.generate_key().decode())
    client = app.test_client()
    refused = run(client, using(unlisted))
    assert refused["type"] == "error" and "not an embedding endpoint" in \
        refused["error_message"], refused
    rest = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "ext", "embedding_model": {"provider": "openai", "model_name": "toy",
                                           "base_url": unlisted}}})
    assert rest.status_code == 422 and "base_url" in rest.get_json()["detail"]
    assert other.calls == []  # no request to an address nobody listed
    assert run(client, using(listed))["type"] == "ok"
    with app.app_context():
        stored = db.session.scalar(select(KnowledgeBase.api_key))
    assert stored and KEY not in stored
    shown = client.get("/api/projects/mindsdb/knowledge_bases/ext").get_data(as_text=True)
    assert KEY not in shown and KEY not in json.dumps(run(client, "SHOW KNOWLEDGE_BASES"))
    assert json.loads(shown)["embedding_model"] == {"provider": "openai",
                                                    "model_name": "toy", "base_url": listed}
    assert run(client, "INSERT INTO mindsdb.ext (id, content) VALUES (1, 'zzz zzz'), "
                       "(2, 'aaa bbb')")["type"] == "ok"
    path, authorization, body = server.calls[-1]
    assert path == "/v1/embeddings" and authorization == f"Bearer {KEY}"
    assert body == {"model": "toy", "input": ["zzz zzz", "aaa bbb"]}
    found = run(client, "SELECT id FROM mindsdb.ext WHERE content = 'zz' LIMIT 1")
    assert found["data"] == [["1"]]
    failed = run(client, "INSERT INTO mindsdb.ext (id, content) VALUES (3, 'boom')")
    assert failed["type"] == "error", failed
    assert listed in failed["error_message"] and "500" in failed["error_message"]
    assert KEY not in failed["error_message"]
    assert run(client, "SELECT id FROM mindsdb.ext WHERE id = 3")["data"] == []
    assert other.calls == []


def test_the_agents_model_endpoint_is_listed_too(make_app, tmp_path, endpoints):
    (listed, unlisted), (_, other) = endpoints
    other.calls.clear()
    client = make_app(LLM_BASE_URL=listed, KB_DIR=str(tmp_path / "kb")).test_client()
    created = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "ext", "embedding_model": {"provider": "openai", "model_name": "toy",
                                           "base_url": listed}}})
    assert created.status_code == 201, created.get_json()
    refused = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "ext2", "embedding_model": {"provider": "openai", "model_name": "toy",
                                            "base_url": unlisted}}})
    assert refused.status_code == 422 and other.calls == []

