"""An agent's API key is kept encrypted, never shown, and still sent to its model: given by
REST (``params.openai_api_key``) or by ``CREATE AGENT … openai_api_key = '…'``, on both
stores, rotated with the databases' key."""

from __future__ import annotations

import json

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from app.extensions import db
from tests.conftest import TEST_KEY
from tests.helpers import assert_problem
from tests.mcp.test_mcp_server import ScriptedModel, _say

REST_KEY = "sk-rest-never-shown-7Hq"
SQL_KEY = "sk-sql-never-shown-4Tz"
SKILL_KEY = "sk-skill-never-shown-2Wd"
LINK_KEY = "tok-link-never-shown-8Pn"


@pytest.fixture(scope="module")
def model():
    scripted = ScriptedModel()
    yield scripted
    scripted.httpd.shutdown()
    scripted.httpd.server_close()


def _store_text(app) -> str:
    with app.app_context():
        return "\n".join(str(row) for table in db.metadata.sorted_tables
                         for row in db.session.execute(select(table)).all())


def _shown(client) -> str:
    """Everything the API shows about agents and statements."""
    parts = [client.get(path).get_data(as_text=True) for path in (
        "/api/projects/mindsdb/agents", "/api/projects/mindsdb/agents/a_rest",
        "/api/projects/mindsdb/agents/a_sql", "/api/audit", "/api/console/history",
        "/api/projects/mindsdb/skills/kb_skill")]
    parts.append(json.dumps(client.post("/api/sql/query", json={
        "query": "SELECT * FROM mindsdb.agents"}).get_json()))
    return "\n".join(parts)


def _ask(client, model, agent: str, name: str) -> str | None:
    """The Authorization header the agent's model received."""
    model.scripts[name] = [_say("Hello.")]
    answer = client.post(f"/api/projects/mindsdb/agents/{agent}/completions",
                         json={"messages": [{"question": "Hi", "answer": None}]})
    assert answer.status_code == 200, answer.get_data(as_text=True)
    return model.seen[-1]["auth"]


def _make_agents(client, model) -> None:
    skill = client.post("/api/projects/mindsdb/skills", json={"skill": {
        "name": "kb_skill", "type": "retrieval",
        "params": {"source": "kb", "embeddings": {"api_key": SKILL_KEY}}}})
    assert skill.status_code == 201, skill.get_data(as_text=True)
    assert skill.get_json()["params"]["embeddings"] == {"api_key": "********"}
    made = client.post("/api/projects/mindsdb/agents", json={"agent": {
        "name": "a_rest", "model": {"base_url": model.url, "model_name": "m_rest"},
        "skills": [{"name": "kb_skill", "parameters": {"search_token": LINK_KEY}}],
        "params": {"temperature": 0.1, "max_tokens": 50, "openai_api_key": REST_KEY}}})
    assert made.status_code == 201, made.get_data(as_text=True)
    assert made.get_json()["params"] == {"temperature": 0.1, "max_tokens": 50,
                                         "openai_api_key": "********"}
    answer = client.post("/api/sql/query", json={"query": (
        f"CREATE AGENT a_sql USING model = {{\"base_url\": \"{model.url}\", "
        f"\"model_name\": \"m_sql\"}}, openai_api_key = '{SQL_KEY}', temperature = 0.2")})
    assert answer.get_json()["type"] == "ok", answer.get_json()


def test_an_agents_key_is_encrypted_never_shown_and_sent_to_its_model(app, client, model):
    _make_agents(client, model)
    stored = _store_text(app)
    shown = _shown(client)
    for key in (REST_KEY, SQL_KEY, SKILL_KEY, LINK_KEY):
        assert key not in stored and key not in shown
    assert "openai_api_key" in shown and "search_token" in shown  # set, and masked
    assert client.get("/api/projects/mindsdb/agents/a_rest").get_json()[
        "skills_extra_parameters"] == {"kb_skill": {"search_token": "********"}}
    assert _ask(client, model, "a_rest", "m_rest") == f"Bearer {REST_KEY}"
    assert _ask(client, model, "a_sql", "m_sql") == f"Bearer {SQL_KEY}"

    # Sent back masked (as mindsdb_sdk does), it keeps the key; a new key replaces it.
    kept = client.put("/api/projects/mindsdb/agents/a_rest", json={"agent": {
        "params": {"temperature": 0.5, "openai_api_key": "********"}}})
    assert kept.status_code == 200 and kept.get_json()["params"]["temperature"] == 0.5
    assert _ask(client, model, "a_rest", "m_rest") == f"Bearer {REST_KEY}"
    client.put("/api/projects/mindsdb/agents/a_rest", json={"agent": {
        "params": {"openai_api_key": "sk-newer-key-9"}}})
    assert _ask(client, model, "a_rest", "m_rest") == "Bearer sk-newer-key-9"
    assert "sk-newer-key-9" not in _store_text(app) + _shown(client)
    # null removes it: the model is called without a key.
    client.put("/api/projects/mindsdb/agents/a_rest", json={"agent": {
        "params": {"openai_api_key": None}}})
    assert _ask(client, model, "a_rest", "m_rest") is None

    # A skill's secret, sent back masked, is kept (encrypted) too.
    kept = client.put("/api/projects/mindsdb/skills/kb_skill", json={"skill": {
        "params": {"source": "kb2", "embeddings": {"api_key": "********"}}}})
    assert kept.status_code == 200 and kept.get_json()["params"]["source"] == "kb2"
    with app.app_context():
        from app.services.credentials import opened_fields
        from app.store import Skill

        skill = db.session.scalars(select(Skill)).one()
        assert skill.secrets is not None and opened_fields(
            {"params": skill.params}, skill.secrets)["params"]["embeddings"]["api_key"] \
            == SKILL_KEY


def test_rotating_the_key_keeps_the_agents_key(make_app, app, client, model):
    _make_agents(client, model)
    new_key = Fernet.generate_key().decode()
    both = make_app(ENCRYPTION_KEY=f"{new_key},{TEST_KEY}")
    result = both.test_cli_runner().invoke(args=["databases", "rotate-key"])
    assert result.exit_code == 0 and "4 agent(s) or skill(s)" in result.output, result.output
    only_new = make_app(ENCRYPTION_KEY=new_key).test_client()
    assert _ask(only_new, model, "a_sql", "m_sql") == f"Bearer {SQL_KEY}"
    only_old = make_app(ENCRYPTION_KEY=TEST_KEY).test_client()
    assert_problem(only_old.post("/api/projects/mindsdb/agents/a_sql/completions", json={
        "messages": [{"question": "Hi", "answer": None}]}), 400, "decrypted")


def test_without_a_key_an_agent_with_an_api_key_is_refused(make_app):
    client = make_app(ENCRYPTION_KEY=None).test_client()
    assert_problem(client.post("/api/projects/mindsdb/agents", json={"agent": {
        "name": "a_nokey", "params": {"openai_api_key": REST_KEY}}}), 422,
        "QUARRY_ENCRYPTION_KEY")
    answer = client.post("/api/sql/query", json={
        "query": f"CREATE AGENT a_nokey USING openai_api_key = '{REST_KEY}'"}).get_json()
    assert answer["type"] == "error" and "QUARRY_ENCRYPTION_KEY" in answer["error_message"]
    assert client.get("/api/projects/mindsdb/agents/a_nokey").status_code == 404
    # Without a secret, an agent needs no key.
    assert client.post("/api/projects/mindsdb/agents", json={"agent": {
        "name": "a_plain", "params": {"max_tokens": 5}}}).status_code == 201
