"""Reranking (issue 31): reranking_model = {…} names a rerank endpoint an administrator
listed (QUARRY_EMBEDDING_ENDPOINTS); a search's best chunks are scored again by it and come
back in its order, its scores as their relevance; reranking = false skips it. The endpoint
is a real HTTP server in the test speaking POST /rerank (Cohere's API, as vLLM and
llama.cpp serve it); the embeddings are the embedded model's, for real."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from app.extensions import db
from app.store import KnowledgeBase
from tests.helpers import sql_runner

from .scripted import endpoint_pair

KEY = "rk-very-secret"
DOCS = {
    1: "The printer jams whenever the paper is damp.",
    2: "Paper keeps getting stuck in the office printer tray.",
    3: "Invoices are sent as PDF files each month.",
    4: "Refunds go back to the card used for the purchase.",
}


def _score(query: str, document: str) -> float:
    """A toy cross-encoder: the share of the question's words in the chunk, with 'tray'
    worth a lot (so its order differs from the vector search's)."""
    words = set(query.lower().split())
    text = document.lower()
    return sum(w in text for w in words) / len(words) + (5.0 if "tray" in text else 0.0)


def _rerank(body: dict) -> tuple[int, dict | None]:
    if "boom" in body["query"]:
        return 503, None
    results = sorted(({"index": i, "relevance_score": _score(body["query"], d)}
                      for i, d in enumerate(body["documents"])),
                     key=lambda r: -r["relevance_score"])[:body["top_n"]]
    return 200, {"model": body["model"], "results": results}


@pytest.fixture(scope="module")
def rerankers():
    """Two servers: the first is listed, the second is not."""
    with endpoint_pair(_rerank) as pair:
        yield pair


def run(client, query: str) -> dict:
    return sql_runner(client)(query)


def table(body: dict) -> list[dict]:
    assert body["type"] == "table", body
    return [dict(zip(body["column_names"], row, strict=True)) for row in body["data"]]


def create(name: str, reranking: str) -> tuple[str, str]:
    values = ", ".join(f"({i}, '{text}')" for i, text in DOCS.items())
    return (f"CREATE KNOWLEDGE_BASE mindsdb.{name} USING reranking_model = {reranking}",
            f"INSERT INTO mindsdb.{name} (id, content) VALUES {values}")


def test_a_listed_rerank_endpoint_reorders_the_search(make_app, tmp_path, rerankers):
    (listed, unlisted), (server, other) = rerankers
    server.calls.clear()
    other.calls.clear()
    app = make_app(EMBEDDING_ENDPOINTS=listed, KB_DIR=str(tmp_path / "kb"),
                   ENCRYPTION_KEY=Fernet.generate_key().decode())
    client = app.test_client()
    def model(url: str) -> str:
        return (f"{{'provider': 'openai', 'model_name': 'toy-rerank', 'base_url': '{url}', "
                f"'api_key': '{KEY}'}}")
    refused = run(client, create("rr", model(unlisted))[0])
    assert refused["type"] == "error" and "not a reranking endpoint" in \
        refused["error_message"], refused
    assert other.calls == []  # no request to an address nobody listed
    for statement in create("rr", model(listed)):
        assert run(client, statement)["type"] == "ok"
    with app.app_context():
        stored = db.session.scalar(select(KnowledgeBase.reranking_api_key))
    assert stored and KEY not in stored
    shown = client.get("/api/projects/mindsdb/knowledge_bases/rr").get_json()
    assert shown["reranking_model"] == {"provider": "openai", "model_name": "toy-rerank",
                                        "base_url": listed}
    assert KEY not in json.dumps(shown) and KEY not in json.dumps(
        run(client, "DESCRIBE KNOWLEDGE_BASE mindsdb.rr"))

    question = "paper stuck in the printer"
    plain = table(run(client, f"SELECT id, relevance, distance FROM mindsdb.rr WHERE "
                              f"content = '{question}' AND reranking = false LIMIT 2"))
    assert server.calls == []  # reranking = false: no request
    assert all(r["relevance"] == pytest.approx(1 / (1 + r["distance"])) for r in plain)
    reranked = table(run(client, f"SELECT id, chunk_content, relevance FROM mindsdb.rr "
                                 f"WHERE content = '{question}' LIMIT 2"))
    path, authorization, body = server.calls[-1]
    assert path == "/v1/rerank" and authorization == f"Bearer {KEY}"
    assert body["model"] == "toy-rerank" and body["query"] == question
    assert len(body["documents"]) == len(DOCS)  # the candidates: more than the answer
    expected = sorted(DOCS.items(), key=lambda d: -_score(question, d[1]))[:2]
    assert [r["id"] for r in reranked] == [str(i) for i, _ in expected]
    assert [r["relevance"] for r in reranked] == \
        pytest.approx([_score(question, text) for _, text in expected])
    assert reranked[0]["id"] == "2"  # the toy model's favourite, whatever the vectors say
    floor = table(run(client, f"SELECT id FROM mindsdb.rr WHERE content = '{question}' "
                              "AND relevance >= 5"))
    assert floor == [{"id": "2"}]

    failed = run(client, "SELECT * FROM mindsdb.rr WHERE content = 'boom'")
    assert failed["type"] == "error" and listed in failed["error_message"]
    assert "503" in failed["error_message"] and KEY not in failed["error_message"]
    assert other.calls == []


def test_reranking_settings_are_checked(make_app, tmp_path, rerankers):
    (listed, _), (server, _) = rerankers
    client = make_app(EMBEDDING_ENDPOINTS=listed, KB_DIR=str(tmp_path / "kb")).test_client()
    for statement in create("plain", "false"):
        assert run(client, statement)["type"] == "ok"
    assert client.get("/api/projects/mindsdb/knowledge_bases/plain"
                      ).get_json()["reranking_model"] is None
    calls = len(server.calls)
    missing = run(client, "SELECT * FROM mindsdb.plain WHERE content = 'x' AND reranking = "
                          "true")
    assert missing["type"] == "error" and "no reranking_model" in missing["error_message"]
    assert len(table(run(client, "SELECT * FROM mindsdb.plain WHERE content = 'x' AND "
                                 "reranking = false"))) == len(DOCS)
    for bad, word in [("'yes'", "reranking_model"),
                      ("{'provider': 'openai', 'model_name': 'm'}", "base_url"),
                      ("{'provider': 'magic', 'base_url': 'x'}", "provider"),
                      (f"{{'base_url': '{listed}'}}", "model_name")]:
        refused = run(client, f"CREATE KNOWLEDGE_BASE mindsdb.bad USING reranking_model = "
                              f"{bad}")
        assert refused["type"] == "error" and word in json.dumps(refused), (bad, refused)
    rest = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "viarest", "reranking_model": {"model_name": "m", "base_url": listed}}})
    assert rest.status_code == 201, rest.get_json()
    assert rest.get_json()["reranking_model"]["provider"] == "openai"
    assert len(server.calls) == calls  # nothing was searched through a reranker here
    # Over REST a refused field is named by its path from the body's root, inside the
    # knowledge_base object it was sent in (a client, or a fuzzer, can find it there).
    refused = client.post("/api/projects/mindsdb/knowledge_bases", json={"knowledge_base": {
        "name": "badrest", "reranking_model": {"model_name": "m"}}})
    assert refused.status_code == 422, refused.get_json()
    assert refused.get_json()["errors"] == {"knowledge_base": {"reranking_model": {
        "base_url": ["Missing data for required field."]}}}
    assert client.get("/api/projects/mindsdb/knowledge_bases/badrest").status_code == 404
