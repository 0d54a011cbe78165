"""The migrations build exactly the schema the mapped classes describe, on SQLite and PostgreSQL."""

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from flask_migrate import downgrade, upgrade
from sqlalchemy import create_engine, inspect, text

from app import create_app
from app.extensions import db
from tests.conftest import pg_database


def _diff(url: str) -> list:
    engine = create_engine(url)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), db.metadata)
    engine.dispose()
    return diff


def _upgrade_then_check(url: str, instance: str) -> None:
    app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": instance, "DEMO_SOURCE": False})
    with app.app_context():
        upgrade()
        assert _diff(url) == []
        tables = set(inspect(db.engine).get_table_names())
        assert {t.name for t in db.metadata.sorted_tables} <= tables
        with db.engine.connect() as conn:
            names = conn.execute(text("SELECT name FROM projects")).scalars().all()
        assert names == ["mindsdb"]
        downgrade(revision="base")
        assert set(inspect(db.engine).get_table_names()) <= {"alembic_version"}
        upgrade()
        assert _diff(url) == []
        db.engine.dispose()


def test_migrations_on_empty_sqlite(tmp_path):
    _upgrade_then_check(f"sqlite:///{tmp_path}/empty.db", str(tmp_path))


@pytest.mark.parametrize("run", ["postgresql"])
def test_migrations_on_empty_postgresql(tmp_path, run):
    with pg_database("quarry_migrate") as url:
        _upgrade_then_check(url, str(tmp_path))


# --- 0014: secrets kept in clear before it ----------------------------------------------------

OLD_PASSWORD = "0ld-pa55word-in-clear"
OLD_API_KEY = "sk-old-key-in-clear-42"


def _rows_of_0012(app, llm_url: str) -> None:
    """What a store of 0012 holds: statements with a password, an agent's key in clear."""
    from app.store.types import utcnow

    statement = ("CREATE DATABASE s WITH ENGINE = 'postgres', PARAMETERS = "
                 f'{{"host": "h", "password": "{OLD_PASSWORD}"}}')
    tables = db.metadata.tables
    with db.engine.begin() as conn:
        conn.execute(tables["audit"].insert().values(
            at=utcnow(), kind="sql", action="query", statement=statement, outcome="error"))
        conn.execute(tables["console_history"].insert().values(
            user_key="", statement=statement, outcome="error", ran_at=utcnow(),
            error_message=f"Syntax error near '{OLD_PASSWORD}'"))
        conn.execute(tables["running_queries"].insert().values(
            id="q1", source="", statement=statement, response_format="json", host="h",
            pid=1, started_at=utcnow(), seen_at=utcnow(), rows_sent=0))
        project = conn.execute(text("SELECT id FROM projects WHERE name = 'mindsdb'")).scalar()
        agent = conn.execute(tables["agents"].insert().values(
            project_id=project, name="old", name_key="old", created_at=utcnow(),
            updated_at=utcnow(), params={"openai_api_key": OLD_API_KEY, "max_tokens": 9},
            model={"base_url": llm_url, "model_name": "m_old"})).inserted_primary_key[0]
        skill = conn.execute(tables["skills"].insert().values(
            project_id=project, name="olds", name_key="olds", type="retrieval",
            created_at=utcnow(), updated_at=utcnow(),
            params={"source": "kb", "api_key": OLD_API_KEY + "-skill"})).inserted_primary_key[0]
        conn.execute(tables["agent_skills"].insert().values(
            agent_id=agent, skill_id=skill, position=0,
            parameters={"api_key": OLD_API_KEY + "-link"}))


def _store_text() -> str:
    with db.engine.connect() as conn:
        return "\n".join(str(row) for table in db.metadata.sorted_tables
                         for row in conn.execute(table.select()).all())


def _upgrade_with_secrets(url: str, instance: str, key: str | None) -> str | None:
    """Migrate a store of 0012 holding secrets in clear; what the agent's model receives."""
    from tests.conftest import _dispose
    from tests.mcp.test_mcp_server import ScriptedModel, _say

    model = ScriptedModel()
    app = create_app({"DATABASE_URL": url, "INSTANCE_PATH": instance, "DEMO_SOURCE": False,
                      "ENCRYPTION_KEY": key})
    try:
        with app.app_context():
            upgrade(revision="0012_running_legs")
            _rows_of_0012(app, model.url)
            upgrade()
            stored = _store_text()
        assert OLD_PASSWORD not in stored and OLD_API_KEY not in stored
        client = app.test_client()
        for path in ("/api/audit", "/api/console/history", "/api/sql/queries",
                     "/api/projects/mindsdb/agents/old"):
            assert OLD_PASSWORD not in client.get(path).get_data(as_text=True)
        assert client.get("/api/audit").get_json()["records"][0]["statement"].endswith(
            "'password': '********'}")
        assert client.get("/api/projects/mindsdb/agents/old").get_json()["params"] == (
            {"openai_api_key": "********", "max_tokens": 9} if key else {"max_tokens": 9})
        model.scripts["m_old"] = [_say("Hello.")]
        answer = client.post("/api/projects/mindsdb/agents/old/completions",
                             json={"messages": [{"question": "Hi", "answer": None}]})
        assert answer.status_code == 200, answer.get_data(as_text=True)
        return model.seen[-1]["auth"]
    finally:
        model.httpd.shutdown()
        model.httpd.server_close()
        _dispose(app)


@pytest.mark.parametrize("kind", ["sqlite", "postgresql"])
def test_0014_masks_statements_and_encrypts_agents_keys(tmp_path, kind):
    from tests.conftest import TEST_KEY

    if kind == "sqlite":
        auth = _upgrade_with_secrets(f"sqlite:///{tmp_path}/old.db", str(tmp_path), TEST_KEY)
    else:
        with pg_database("quarry_migrate_secrets") as url:
            auth = _upgrade_with_secrets(url, str(tmp_path), TEST_KEY)
    assert auth == f"Bearer {OLD_API_KEY}"  # encrypted, and still the agent's key


def test_0014_without_a_key_removes_agents_keys(tmp_path):
    # Nothing to encrypt them with: they go (never kept in clear); the agent runs without.
    assert _upgrade_with_secrets(f"sqlite:///{tmp_path}/old.db", str(tmp_path), None) is None
