"""POST /api/projects/<p>/knowledge_bases/<kb>/completions (MindsDB's route, mindsdb_sdk's
kb.completion): the passages that answer a question (type context), and a model's answer from
them (type chat) through the administrator's OpenAI-compatible endpoint, scripted over real
HTTP. The embedded embedding model runs for real."""

from __future__ import annotations

import pytest

from tests.kb.scripted import endpoint_pair
from tests.kb.test_knowledge_bases import DOCS, make_kb, ok, rows

# The route reads through the same search as SELECT … WHERE content, which the store tests
# of tests/kb/test_knowledge_bases.py run on both stores: one store is enough here.
pytestmark = pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)

KEY = "sk-completion-secret"
ROUTE = "/api/projects/mindsdb/knowledge_bases/kb/completions"


def _chat_answer(body):
    if body.get("model") == "broken":
        return 500, {"error": {"message": "the model fell over"}}
    return 200, {"id": "c", "object": "chat.completion", "choices": [{
        "index": 0, "finish_reason": "stop",
        "message": {"role": "assistant", "content": "Use 'Forgot password' on the sign-in page."}}]}


@pytest.fixture(scope="module")
def llm():
    with endpoint_pair(_chat_answer) as (urls, servers):
        yield urls[0], servers[0]


@pytest.fixture
def client(make_app, tmp_path, llm):
    app = make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb"), LLM_BASE_URL=llm[0],
                   LLM_MODEL="m", LLM_API_KEY=KEY)
    client = app.test_client()
    make_kb(client)
    llm[1].calls.clear()
    return client


def test_type_context_answers_the_passages_best_first(client):
    answer = client.post(ROUTE, json={"query": "I lost my credentials", "type": "context",
                                      "limit": 2})
    assert answer.status_code == 200, answer.get_json()
    documents = answer.get_json()["documents"]
    assert [d["rank"] for d in documents] == [1, 2]
    assert documents[0]["id"] == "1" and documents[0]["content"] == DOCS[0][1]
    assert documents[0]["metadata"] == {"category": "auth", "year": 2024}
    assert documents[0]["relevance"] > documents[1]["relevance"]
    # The same ranking as the SQL search of that text.
    searched = rows(ok(client, "SELECT id FROM mindsdb.kb WHERE content = 'I lost my "
                               "credentials' LIMIT 2"))
    assert [d["id"] for d in documents] == [r["id"] for r in searched]

    billing = client.post(ROUTE, json={"query": "money", "type": "context",
                                       "metadata": {"category": "billing"}}).get_json()
    assert sorted(d["id"] for d in billing["documents"]) == ["2", "4"]
    # keywords: fused with the BM25 ranking of those words.
    worded = client.post(ROUTE, json={"query": "payments", "type": "context", "limit": 1,
                                      "keywords": "refunds card purchase"}).get_json()
    assert worded["documents"][0]["id"] == "4"


def test_type_chat_hands_the_passages_to_the_model(client, llm):
    answer = client.post(ROUTE, json={"query": "How do I get into my account without my "
                                               "password?", "limit": 2})
    assert answer.status_code == 200, answer.get_json()
    message = answer.get_json()["message"]
    assert message["role"] == "assistant"
    assert message["content"] == "Use 'Forgot password' on the sign-in page."
    assert message["context"][0]["id"] == "1" and len(message["context"]) == 2
    [(path, auth, body)] = llm[1].calls
    assert path == "/v1/chat/completions" and auth == f"Bearer {KEY}"
    assert body["model"] == "m"
    prompt = body["messages"][0]["content"]
    assert "without my password?" in prompt and f"[1] {DOCS[0][1]}" in prompt
    # Another model of the same endpoint; a template is filled by replacement, not format().
    client.post(ROUTE, json={"query": "refunds", "llm_model": "other", "limit": 1,
                             "prompt_template": "Q={question} {question.__class__} C={context}"})
    body = llm[1].calls[-1][2]
    assert body["model"] == "other"
    assert body["messages"][0]["content"] == (
        f"Q=refunds {{question.__class__}} C=[4] {DOCS[3][1]}")


def test_bad_requests_say_what_was_wrong(client, llm, make_app, tmp_path):
    for bad, field in (({}, "query"), ({"query": "x", "type": "summary"}, "type"),
                       ({"query": "x", "limit": 0}, "limit"),
                       ({"query": "x", "limit": "3"}, "limit"),
                       ({"query": "x", "metadata": {"category": ["a"]}}, "metadata"),
                       ({"query": "x", "model_provider": "bedrock"}, "model_provider"),
                       ({"query": "x", "retrieval_config": {}}, "retrieval_config")):
        answer = client.post(ROUTE, json=bad)
        assert answer.status_code == 400, (bad, answer.get_json())
        assert field in answer.get_json()["errors"], answer.get_json()
    missing = client.post(ROUTE.replace("/kb/", "/nope/"), json={"query": "x"})
    assert missing.status_code == 404
    unknown = client.post(ROUTE, json={"query": "x", "type": "context",
                                       "metadata": {"colour": "red"}})
    assert unknown.status_code == 422 and "colour" in unknown.get_json()["detail"]
    # The endpoint fails: 502 naming it, never its key.
    failed = client.post(ROUTE, json={"query": "x", "llm_model": "broken"})
    assert failed.status_code == 502, failed.get_json()
    assert llm[0] in failed.get_json()["detail"] and KEY not in failed.get_data(as_text=True)
    calls = len(llm[1].calls)
    # No endpoint set: chat is a 422 saying how to set one (context still answers).
    bare = make_app(DEMO_SOURCE=True, KB_DIR=str(tmp_path / "kb")).test_client()  # same store
    refused = bare.post(ROUTE, json={"query": "x"})
    assert refused.status_code == 422 and "QUARRY_LLM_BASE_URL" in refused.get_json()["detail"]
    assert bare.post(ROUTE, json={"query": "x", "type": "context"}).status_code == 200
    assert len(llm[1].calls) == calls
