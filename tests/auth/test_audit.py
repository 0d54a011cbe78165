"""The audit log: changes with before and after (secrets masked) in the change's own
transaction, every SQL statement, read by admins over REST and SQL, pruned by age."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

import pytest
from sqlalchemy import func, select, update

from app import create_app
from app.extensions import db
from app.services import audit as audit_service
from app.services import auth as auth_service
from app.store import AuditRecord
from app.store.types import utcnow
from tests.auth.conftest import PASSWORD
from tests.conftest import _dispose
from tests.helpers import assert_problem
from tests.live import free_port


def _setup(app):
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        return {n: {"Authorization": f"Bearer {auth_service.create_token(n, 't')[1]}"}
                for n in ("root", "alice")}


def _records(client, headers, **args):
    response = client.get("/api/audit", query_string=args, headers=headers)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_changes_are_recorded_with_before_after_and_masked_secrets(make_auth_app):
    app = make_auth_app(DEMO_SOURCE=True)
    h = _setup(app)
    client = app.test_client()
    client.post("/api/projects", json={"name": "pa"}, headers=h["alice"])
    skill = {"skill": {"name": "s1", "type": "retrieval",
                       "params": {"source": "kb", "api_key": "sk-very-secret"}}}
    assert client.post("/api/projects/pa/skills", json=skill, headers=h["alice"]).status_code \
        == 201
    client.put("/api/projects/pa/skills/s1", json={"skill": {"params": {"source": "kb2"}}},
               headers=h["alice"])
    client.delete("/api/projects/pa/skills/s1", headers=h["alice"])
    page = _records(client, h["root"], kind="skill")
    actions = [(r["action"], r["user"], r["target"]) for r in page["records"]]
    assert actions == [("delete", "alice", "pa.s1"), ("update", "alice", "pa.s1"),
                       ("create", "alice", "pa.s1")]
    update = page["records"][1]
    assert update["before"]["params"]["source"] == "kb"
    assert update["after"]["params"]["source"] == "kb2"
    text = str(page)
    assert "sk-very-secret" not in text and update["after"]["params"]["api_key"] != ""
    project = _records(client, h["root"], kind="project")["records"]
    assert [(r["action"], r["target"], r["user"]) for r in project] == [
        ("create", "pa", "alice")]
    users = _records(client, h["root"], kind="user")["records"]
    assert {(r["action"], r["target"], r["user"]) for r in users} == {
        ("create", "root", "(cli)"), ("create", "alice", "(cli)")}
    grants = _records(client, h["root"], kind="token")["records"]
    assert len(grants) == 2 and all("qt_" not in str(r) for r in grants)


def test_a_failed_change_leaves_no_record(make_auth_app):
    app = make_auth_app()
    h = _setup(app)
    client = app.test_client()
    client.post("/api/projects", json={"name": "pa"}, headers=h["alice"])
    skill = {"skill": {"name": "s1", "type": "retrieval", "params": {"source": "kb"}}}
    client.post("/api/projects/pa/skills", json=skill, headers=h["alice"])
    # The insert fails at commit (the unique key): its record is rolled back with it.
    assert_problem(client.post("/api/projects/pa/skills", json=skill, headers=h["alice"]), 409)
    assert len(_records(client, h["root"], kind="skill")["records"]) == 1


def test_every_sql_statement_is_recorded(make_auth_app):
    app = make_auth_app(DEMO_SOURCE=True)
    h = _setup(app)
    client = app.test_client()
    for query in ("SELECT * FROM demo.iris WHERE sepal_length > 7 LIMIT 4",
                  "SELECT nosuch FROM demo.iris", "SHOW PROJECTS"):
        client.post("/api/sql/query", json={"query": query}, headers=h["alice"])
    records = _records(client, h["root"], kind="sql", user="alice")["records"]
    assert [r["statement"] for r in records] == [
        "SHOW PROJECTS", "SELECT nosuch FROM demo.iris",
        "SELECT * FROM demo.iris WHERE sepal_length > 7 LIMIT 4"]
    show, failed, ok = records
    assert (ok["source"], ok["row_count"], ok["outcome"], ok["error_code"]) == (
        "demo", 4, "ok", None)
    assert (failed["source"], failed["outcome"], failed["error_code"]) == ("demo", "error", "15")
    assert ok["duration_ms"] > 0 and show["source"] is None
    # Read in SQL too, by admins only.
    answer = client.post("/api/sql/query", json={
        "query": "SELECT user_name, statement, row_count FROM quarry.audit "
                 "WHERE kind = 'sql' AND source = 'demo' AND outcome = 'ok'"},
        headers=h["root"]).get_json()
    assert answer["data"] == [["alice", ok["statement"], 4]]
    denied = client.post("/api/sql/query", json={"query": "SELECT * FROM quarry.audit"},
                         headers=h["alice"]).get_json()
    assert denied["type"] == "error" and denied["error_code"] == 24


def test_pages_by_cursor_filters_and_admin_only(make_auth_app):
    app = make_auth_app(DEMO_SOURCE=True)
    h = _setup(app)
    client = app.test_client()
    for i in range(7):
        client.post("/api/sql/query", json={"query": f"SELECT {i} AS n"}, headers=h["alice"])
    seen, cursor = [], None
    while True:
        args = {"kind": "sql", "limit": 3, **({"after": cursor} if cursor else {})}
        page = _records(client, h["root"], **args)
        seen += [r["statement"] for r in page["records"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"SELECT {i} AS n" for i in reversed(range(7))]
    assert _records(client, h["root"], kind="sql",
                    since=(utcnow() + timedelta(hours=1)).isoformat())["records"] == []
    assert_problem(client.get("/api/audit", headers=h["alice"]), 403, "admin")
    assert_problem(client.get("/api/audit?after=zzz", headers=h["root"]), 422, "cursor")
    assert_problem(client.get("/api/audit?kind=nope", headers=h["root"]), 400, "kind")


def test_old_records_are_pruned(make_auth_app):
    app = make_auth_app(AUDIT_RETENTION_DAYS=30)
    h = _setup(app)
    client = app.test_client()
    client.post("/api/projects", json={"name": "pa"}, headers=h["alice"])
    with app.app_context():
        total = db.session.scalar(select(func.count()).select_from(AuditRecord))
        db.session.execute(update(AuditRecord).where(AuditRecord.kind == "user")
                           .values(at=utcnow() - timedelta(days=31)))
        db.session.commit()
    result = app.test_cli_runner().invoke(args=["audit", "prune"])
    assert result.exit_code == 0 and "2 audit record(s) deleted" in result.output
    with app.app_context():
        assert db.session.scalar(select(func.count()).select_from(AuditRecord)) == total - 2
        assert audit_service.prune(0) == total - 2


@pytest.mark.parametrize("sync_commit", [False, True], ids=["default", "sync-commit"])
def test_a_statement_is_in_the_log_before_its_answer(make_auth_app, sync_commit):
    # Two instances on one store: one answers alice, the other answers the admin, who reads
    # the log at once after each answer (no pause): the record must already be in the store.
    app = make_auth_app(DEMO_SOURCE=True, AUDIT_SYNC_COMMIT=sync_commit)
    h = _setup(app)
    asked, reader = app.test_client(), make_auth_app(DEMO_SOURCE=True).test_client()
    for i in range(20):
        query = f"SELECT {i} AS n"
        answer = asked.post("/api/sql/query", json={"query": query}, headers=h["alice"])
        assert answer.get_json()["data"] == [[i]]
        (record,) = _records(reader, h["root"], kind="sql", limit=1)["records"]
        assert (record["statement"], record["user"], record["row_count"], record["outcome"]) \
            == (query, "alice", 1, "ok")
    # The history row is written with it, and read by the other instance too.
    history = reader.get("/api/console/history", headers=h["alice"]).get_json()
    assert [r["statement"] for r in history[:2]] == ["SELECT 19 AS n", "SELECT 18 AS n"]
    if app.config["DATABASE_URL"].startswith("sqlite"):
        # The record's write left its connection at the store's own flush level (FULL).
        with app.app_context():
            assert db.session.connection().exec_driver_sql("PRAGMA synchronous").scalar() == 2


def test_statements_of_two_instances_at_once_are_all_recorded(make_auth_app):
    # Two instances on one store, eight callers at once: every statement's record and
    # history row is written (on a SQLite store, one write at a time across processes, each
    # on its own connection), none lost, their times read back as every other record's.
    instances = [make_auth_app(DEMO_SOURCE=True), make_auth_app(DEMO_SOURCE=True)]
    h = _setup(instances[0])
    queries = [f"SELECT {caller * 100 + i} AS n" for caller in range(8) for i in range(12)]

    def call(caller: int) -> None:
        client = instances[caller % 2].test_client()
        for i in range(12):
            answer = client.post("/api/sql/query", json={"query": queries[caller * 12 + i]},
                                 headers=h["alice"])
            assert answer.get_json()["data"] == [[caller * 100 + i]]

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(call, range(8)))
    reader = instances[1].test_client()
    records = _records(reader, h["root"], kind="sql", user="alice", limit=200)["records"]
    assert sorted(r["statement"] for r in records) == sorted(queries)
    assert len({r["id"] for r in records}) == len(queries)
    assert all(datetime.fromisoformat(r["at"]).utcoffset() == timedelta(0) for r in records)
    history = reader.get("/api/console/history", query_string={"limit": 200},
                         headers=h["alice"]).get_json()
    assert sorted(r["statement"] for r in history) == sorted(queries)


def test_a_streamed_statement_is_recorded_before_its_first_byte(make_auth_app):
    app = make_auth_app(DEMO_SOURCE=True)
    h = _setup(app)
    reader = make_auth_app(DEMO_SOURCE=True).test_client()
    query = "SELECT * FROM demo.iris"
    response = app.test_client().post(
        "/api/sql/query", json={"query": query, "response_format": "jsonlines"},
        headers=h["alice"], buffered=False)
    assert response.status_code == 200
    # Not a byte of the body read yet: the record is there, its stream still going.
    (record,) = _records(reader, h["root"], kind="sql", limit=1)["records"]
    assert (record["statement"], record["source"], record["row_count"], record["outcome"]) \
        == (query, "demo", None, "streaming")
    lines = response.get_data().splitlines()
    response.close()
    assert json.loads(lines[-1]) == {"type": "end", "row_count": 150}
    (done,) = _records(reader, h["root"], kind="sql", limit=1)["records"]
    assert (done["id"], done["row_count"], done["outcome"]) == (record["id"], 150, "ok")
    assert done["duration_ms"] >= record["duration_ms"]
    (entry,) = reader.get("/api/console/history", headers=h["alice"]).get_json()
    assert (entry["statement"], entry["outcome"], entry["row_count"]) == (query, "table", 150)


@pytest.mark.parametrize("fmt", ["json", "jsonlines"])
def test_no_answer_goes_out_unaudited(tmp_path, fmt):
    # A store that refuses connections (sign-in off: SELECT 1 needs the store only for its
    # record): the statement is refused with 503 rather than answered without a record.
    app = create_app({"DATABASE_URL": "postgresql+psycopg://postgres@127.0.0.1:"
                                      f"{free_port()}/quarry", "INSTANCE_PATH": str(tmp_path),
                      "DEMO_SOURCE": False, "TESTING": True})
    try:
        response = app.test_client().post("/api/sql/query", json={
            "query": "SELECT 1", "response_format": fmt})
        assert_problem(response, 503, "metadata store")
    finally:
        _dispose(app)
