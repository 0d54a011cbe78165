"""Roles, project members, data-source grants and narrowed tokens, through HTTP with real
tokens, on SQLite and PostgreSQL stores."""

from __future__ import annotations

import json
import os
import sqlite3

import pytest

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD
from tests.helpers import assert_problem

PID = os.getpid()
SALES = f"sales_{PID}"


def _sales_file(path) -> str:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE orders (id INTEGER, qty INTEGER, amount REAL)")
    conn.executemany("INSERT INTO orders VALUES (?, ?, ?)",
                     [(i, i % 7, (i % 7) * 2.5 + i % 3) for i in range(1, 41)])
    conn.commit()
    conn.close()
    return f"sqlite:///{path}"


class Team:
    """An app with sign-in on, an admin (root) and two members (alice, bob), each with a
    token; a private data source SALES and the public demo source."""

    def __init__(self, app):
        self.app = app
        self.client = app.test_client()
        self.tokens = {}
        with app.app_context():
            auth_service.create_user("root", PASSWORD, admin=True)
            for name in ("alice", "bob"):
                auth_service.create_user(name, PASSWORD)
            for name in ("root", "alice", "bob"):
                self.tokens[name] = auth_service.create_token(name, "tests")[1]

    def h(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    def sql(self, who: str, query: str, **extra):
        response = self.client.post("/api/sql/query", json={"query": query, **extra},
                                    headers=self.h(who))
        assert response.status_code == 200, response.get_data(as_text=True)
        return response.get_json()

    def project(self, who: str, name: str):
        return self.client.post("/api/projects", json={"name": name}, headers=self.h(who))


@pytest.fixture
def team(make_auth_app, tmp_path) -> Team:
    url = _sales_file(tmp_path / "sales.db")
    return Team(make_auth_app(DEMO_SOURCE=True, DATA_SOURCES={SALES: {"url": url}}))


def test_a_project_is_seen_only_by_its_members(team):
    assert team.project("alice", "pa").status_code == 201
    names = lambda who: [p["name"] for p in team.client.get(  # noqa: E731
        "/api/projects", headers=team.h(who)).get_json()]
    assert "pa" in names("alice") and "pa" in names("root")
    assert "pa" not in names("bob")
    # Another team's project answers 404, like one that does not exist: names do not leak.
    assert_problem(team.client.get("/api/projects/pa", headers=team.h("bob")), 404, "pa")
    assert_problem(team.client.get("/api/projects/pa/skills", headers=team.h("bob")), 404)
    shown = team.sql("bob", "SHOW DATABASES")["data"]
    assert ["pa"] not in shown and [SALES] not in shown and ["demo"] in shown
    assert ["pa"] in team.sql("alice", "SHOW DATABASES")["data"]
    rows = team.sql("bob", "SELECT name FROM information_schema.databases")["data"]
    assert ["pa"] not in rows
    members = team.client.get("/api/projects/pa/members", headers=team.h("alice")).get_json()
    assert [(m["user"], m["role"]) for m in members] == [("alice", "owner")]


def test_viewer_reads_editor_changes_owner_manages(team):
    team.project("alice", "pa")
    skill = {"skill": {"name": "s1", "type": "retrieval", "params": {"source": "kb"}}}
    put = lambda who, user, role: team.client.put(  # noqa: E731
        f"/api/projects/pa/members/{user}", json={"role": role}, headers=team.h(who))
    assert put("alice", "bob", "viewer").status_code == 200
    assert team.client.get("/api/projects/pa/skills", headers=team.h("bob")).status_code == 200
    assert_problem(team.client.post("/api/projects/pa/skills", json=skill,
                                    headers=team.h("bob")), 403, "viewer", "editor")
    # A viewer may not grant, and an editor neither: only owners and admins.
    assert_problem(put("bob", "bob", "owner"), 403, "owner")
    assert put("alice", "bob", "editor").json["role"] == "editor"
    assert team.client.post("/api/projects/pa/skills", json=skill,
                            headers=team.h("bob")).status_code == 201
    assert_problem(put("bob", "bob", "owner"), 403)
    assert_problem(team.client.delete("/api/projects/pa?cascade=true", headers=team.h("bob")),
                   403)
    # Unknown user, unknown project: 404; a bad role: 400.
    assert_problem(put("alice", "nobody", "viewer"), 404, "nobody")
    assert_problem(team.client.put("/api/projects/nope/members/bob", json={"role": "viewer"},
                                   headers=team.h("alice")), 404, "nope")
    assert_problem(put("alice", "bob", "king"), 400, "role")
    # The last owner stays: removing or demoting alice is refused until another owner exists.
    assert_problem(team.client.delete("/api/projects/pa/members/alice",
                                      headers=team.h("alice")), 409, "last owner")
    assert_problem(put("alice", "alice", "viewer"), 409, "last owner")
    assert put("root", "bob", "owner").status_code == 200
    assert team.client.delete("/api/projects/pa/members/alice",
                              headers=team.h("bob")).status_code == 204
    assert_problem(team.client.get("/api/projects/pa", headers=team.h("alice")), 404)


def test_revoke_holds_on_the_next_request_of_another_worker(team, make_auth_app):
    # A second app on the same store stands for another worker (or instance).
    other = make_auth_app(DEMO_SOURCE=True).test_client()
    team.project("alice", "pa")
    team.client.put("/api/projects/pa/members/bob", json={"role": "viewer"},
                    headers=team.h("alice"))
    assert other.get("/api/projects/pa", headers=team.h("bob")).status_code == 200
    team.client.delete("/api/projects/pa/members/bob", headers=team.h("alice"))
    assert other.get("/api/projects/pa", headers=team.h("bob")).status_code == 404


def test_grants_in_sql(team):
    team.sql("alice", "CREATE PROJECT pa")
    assert team.sql("alice", "GRANT viewer ON PROJECT pa TO bob")["type"] == "ok"
    assert ["bob", "project", "pa", "viewer"] in team.sql("bob", "SHOW GRANTS")["data"]
    assert ["pa"] in team.sql("bob", "SHOW PROJECTS")["data"]
    answer = team.sql("bob", "GRANT editor ON PROJECT pa TO bob")
    assert answer["type"] == "error" and answer["error_code"] == 24
    assert team.sql("alice", "GRANT viewer ON PROJECT pa TO nobody")["error_code"] == 17
    assert team.sql("alice", "GRANT viewer ON PROJECT nope TO bob")["error_code"] == 17
    assert team.sql("alice", "GRANT viewer ON PROJECT pa bob")["error_code"] == 1
    assert team.sql("alice", "REVOKE ON PROJECT pa FROM alice")["error_code"] == 18
    assert team.sql("alice", 'REVOKE viewer ON PROJECT "pa" FROM bob;')["type"] == "ok"
    assert ["pa"] not in team.sql("bob", "SHOW PROJECTS")["data"]
    # Another user's grants are an admin's to see.
    assert team.sql("bob", "SHOW GRANTS FOR alice")["error_code"] == 24
    rows = team.sql("root", "SHOW GRANTS FOR alice")["data"]
    assert ["alice", "role", "", "member"] in rows and ["alice", "project", "pa", "owner"] in rows


MISSING = f"nosuch_{PID}"
VARYING = ("request_id", "instance", "query_id", "timestamp")  # differ on every request


def _masked(answer, name: str) -> str:
    """An answer with the name the caller typed taken out (and the ids of the request and
    the statement, which differ per request)."""
    if isinstance(answer, tuple):  # (status, body)
        return _masked(list(answer[:-1]), name) + _masked(answer[-1], name)
    if isinstance(answer, dict):
        answer = {k: v for k, v in answer.items() if k not in VARYING}
    return json.dumps(answer, sort_keys=True).replace(name, "<name>")


def assert_same_as_missing(ask) -> dict:
    """``ask(name)`` answers the same for SALES (not granted) as for a source that does not
    exist, but for the name itself; the answer for SALES."""
    forbidden, missing = ask(SALES), ask(MISSING)
    assert _masked(forbidden, SALES) == _masked(missing, MISSING)
    return forbidden


def test_a_private_source_needs_a_grant_and_demo_is_public(team):
    query = "SELECT count(*) AS n FROM {}.orders"
    assert team.sql("bob", "SELECT count(*) FROM demo.iris")["type"] == "table"
    denied = assert_same_as_missing(lambda name: team.sql("bob", query.format(name)))
    assert denied["type"] == "error" and denied["error_code"] == 5  # UNKNOWN_SOURCE
    # Only an admin grants on data sources.
    assert team.sql("alice", f"GRANT query ON DATABASE {SALES} TO bob")["error_code"] == 24
    assert team.sql("root", f"GRANT query ON DATABASE {SALES} TO bob")["type"] == "ok"
    assert team.sql("bob", query.format(SALES))["data"] == [[40]]
    assert team.sql("root", f"GRANT query ON DATABASE nosuch_{PID} TO bob")["error_code"] == 17
    assert team.sql("root", f"REVOKE query ON DATABASE {SALES} FROM bob")["type"] == "ok"
    assert team.sql("bob", query.format(SALES))["error_code"] == 5
    assert team.sql("root", query.format(SALES))["data"] == [[40]]


def test_an_unqueryable_source_answers_as_a_missing_one_everywhere(team):
    """SQL (qualified, as context, DESCRIBE), REST (/api/databases), the console's schema:
    a source the caller may not query is indistinguishable from one that does not exist."""
    h = team.h("bob")

    def rest(path: str):
        def ask(name: str):
            response = team.client.get(path.format(name), headers=h)
            return response.status_code, response.get_json()
        return ask

    for statement in ("SELECT * FROM {}.orders", "SHOW TABLES FROM {}",
                      "DESCRIBE DATABASE {}", "SELECT * FROM {}.public.orders", "USE {}"):
        assert_same_as_missing(lambda name, s=statement: team.sql("bob", s.format(name)))
    assert_same_as_missing(lambda name: team.sql("bob", "SELECT * FROM orders",
                                                 context={"db": name}))
    assert rest("/api/databases/{}")(SALES)[0] == 404
    assert_same_as_missing(rest("/api/databases/{}"))
    assert_same_as_missing(rest("/api/databases/{}/tables"))
    names = [d["name"] for d in team.client.get("/api/databases", headers=h).get_json()]
    assert SALES not in names and "demo" in names
    schema = team.client.get("/api/console/schema", headers=h).get_json()
    assert SALES not in json.dumps(schema)
    # Nothing lists it either: the unknown-source messages name only what bob may query.
    answer = team.sql("bob", f"SELECT * FROM {MISSING}.orders")
    assert SALES not in answer["error_message"] and "demo" in answer["error_message"]


def test_models_predictions_and_skills_cannot_reach_an_ungranted_source(team):
    team.project("bob", "pb")
    create = ("CREATE MODEL pb.m FROM {} (SELECT qty, amount FROM orders) "
              "PREDICT amount")
    answer = assert_same_as_missing(lambda name: team.sql("bob", create.format(name)))
    assert answer["type"] == "error"
    rest = assert_same_as_missing(lambda name: (lambda r: (r.status_code, r.get_json()))(
        team.client.post("/api/projects/pb/models", json={"query": create.format(name)},
                         headers=team.h("bob"))))
    assert rest[0] == 422  # the body has the right shape; what it names cannot be used
    # A training query naming the source inside (no FROM <source>): the same.
    inner = "CREATE MODEL pb.m2 FROM mindsdb (SELECT qty, amount FROM {}.orders) PREDICT amount"
    assert_same_as_missing(lambda name: team.sql("bob", inner.format(name)))

    def skill(name: str):
        body = {"skill": {"name": "s", "type": "sql",
                          "params": {"database": name, "tables": ["orders"]}}}
        response = team.client.post("/api/projects/pb/skills", json=body,
                                    headers=team.h("bob"))
        return response.status_code, response.get_json()

    assert assert_same_as_missing(skill)[0] == 422
    # Trained by someone who may read the source, the model's JOIN still reads it as bob.
    team.sql("root", f"GRANT query ON DATABASE {SALES} TO bob")
    trained = team.sql("bob", create.format(SALES) +
                       " USING join_learn_process = true, time_budget_s = 1")
    assert trained["type"] == "table", trained
    team.sql("root", f"REVOKE query ON DATABASE {SALES} FROM bob")
    join = "SELECT t.qty, m.amount FROM {}.orders AS t JOIN pb.m AS m LIMIT 3"
    joined = assert_same_as_missing(lambda name: team.sql("bob", join.format(name)))
    assert joined["error_code"] == 5
    assert team.sql("bob", "SELECT amount FROM pb.m WHERE qty = 3")["type"] == "table"


def test_a_narrowed_token_stays_in_its_project_and_reads_only(team):
    team.project("alice", "pa")
    team.project("alice", "pz")
    with team.app.app_context():
        team.tokens["ro"] = auth_service.create_token("alice", "dash", project="pa",
                                                      read_only=True)[1]
    names = [p["name"] for p in team.client.get("/api/projects", headers=team.h("ro")).json]
    assert names == ["pa"]
    assert team.client.get("/api/projects/pa/skills", headers=team.h("ro")).status_code == 200
    assert_problem(team.client.get("/api/projects/pz", headers=team.h("ro")), 404)
    skill = {"skill": {"name": "s1", "type": "retrieval", "params": {"source": "kb"}}}
    assert_problem(team.client.post("/api/projects/pa/skills", json=skill,
                                    headers=team.h("ro")), 403, "read-only")
    assert_problem(team.project("ro", "px"), 403)
    # Its owner's own rights are the ceiling: the token does not exceed them.
    assert_problem(team.client.get("/api/audit", headers=team.h("ro")), 403)


def test_with_sign_in_off_everything_is_as_before(make_app):
    client = make_app().test_client()
    assert client.post("/api/projects", json={"name": "pa"}).status_code == 201
    assert "pa" in [p["name"] for p in client.get("/api/projects").json]
    skill = {"skill": {"name": "s1", "type": "retrieval", "params": {"source": "kb"}}}
    assert client.post("/api/projects/pa/skills", json=skill).status_code == 201
    assert client.get("/api/projects/pa/members").json == []
    answer = client.post("/api/sql/query", json={"query": "SELECT 1 AS one"}).json
    assert answer["data"] == [[1]]


def test_databases_created_at_run_time_are_admins_and_need_a_grant(team, session_dir):
    path = os.path.join(session_dir, f"runtime_{PID}.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    conn.execute("DELETE FROM t")
    conn.executemany("INSERT INTO t VALUES (?)", [(1,), (2,), (3,)])
    conn.commit()
    conn.close()
    name = f"rt_{PID}"
    create = (f"CREATE DATABASE {name} WITH ENGINE = 'sqlite', "
              f"PARAMETERS = {{\"db_file\": \"{path}\"}}")
    assert team.sql("alice", create)["error_code"] == 24  # only admins connect databases
    assert team.sql("root", create)["type"] == "ok", team.sql("root", "SHOW DATABASES")
    query = f"SELECT count(*) FROM {name}.t"
    assert team.sql("alice", query)["error_code"] == 5  # as if it did not exist
    assert [name] not in team.sql("alice", "SHOW DATABASES")["data"]
    names = [d["name"] for d in team.client.get("/api/databases", headers=team.h("alice")).json]
    assert name not in names
    assert_problem(team.client.get(f"/api/databases/{name}", headers=team.h("alice")), 404)
    assert team.sql("root", f"GRANT query ON DATABASE {name} TO alice")["type"] == "ok"
    assert team.sql("alice", query)["data"] == [[3]]
    assert team.client.get(f"/api/databases/{name}/tables",
                           headers=team.h("alice")).status_code == 200
    assert_problem(team.client.delete(f"/api/databases/{name}", headers=team.h("alice")), 403)
    assert team.sql("alice", f"DROP DATABASE {name}")["error_code"] == 24
    audit = team.client.get("/api/audit?kind=database", headers=team.h("root")).json
    assert [(r["action"], r["target"], r["user"]) for r in audit["records"]] == [
        ("create", name, "root")]


def test_a_database_created_at_run_time_can_be_made_public(team, session_dir):
    path = os.path.join(session_dir, f"public_{PID}.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    conn.commit()
    conn.close()
    name = f"pub_{PID}"
    body = {"database": {"name": name, "engine": "sqlite",
                         "parameters": {"db_file": path, "public": True}}}
    # Only an admin connects (and so publishes) a database.
    assert_problem(team.client.post("/api/databases", json=body, headers=team.h("alice")),
                   403)
    created = team.client.post("/api/databases", json=body, headers=team.h("root"))
    assert created.status_code == 201, created.get_json()
    assert created.get_json()["public"] is True
    assert "public" not in created.get_json()["connection_data"]
    query = f"SELECT count(*) FROM {name}.t"
    assert team.sql("alice", query)["data"] == [[0]]  # no grant needed
    # Made private again (PUT), it needs a grant; in SQL, PARAMETERS carry the option too.
    changed = team.client.put(f"/api/databases/{name}", json={"database": {"parameters": {
        "db_file": path, "public": False}}}, headers=team.h("root"))
    assert changed.status_code == 200 and changed.get_json()["public"] is False
    assert team.sql("alice", query)["error_code"] == 5
    sql_name = f"pubsql_{PID}"
    made = team.sql("root", f"CREATE DATABASE {sql_name} WITH ENGINE = 'sqlite', PARAMETERS = "
                            f"{{\"db_file\": \"{path}\", \"public\": true}}")
    assert made["type"] == "ok", made
    assert team.sql("bob", f"SELECT count(*) FROM {sql_name}.t")["data"] == [[0]]
    bad = {"database": {"name": "pub_bad", "engine": "sqlite",
                        "parameters": {"db_file": path, "public": "yes"}}}
    assert_problem(team.client.post("/api/databases", json=bad, headers=team.h("root")),
                   400, "public")


def test_roles_and_narrowed_tokens_from_the_command_line(team):
    cli = team.app.test_cli_runner()
    result = cli.invoke(args=["users", "create", "carol", "--admin"], input=PASSWORD + "\n")
    assert result.exit_code == 0 and "(admin)" in result.output
    assert cli.invoke(args=["users", "set-role", "alice", "admin"]).exit_code == 0
    assert "alice\tadmin" in cli.invoke(args=["users", "list"]).output
    for name in ("alice", "carol"):
        assert cli.invoke(args=["users", "set-role", name, "member"]).exit_code == 0
    last = cli.invoke(args=["users", "set-role", "root", "member"])
    assert last.exit_code == 1 and "last admin" in last.output
    team.project("bob", "pb")
    result = cli.invoke(args=["tokens", "create", "bob", "--project", "pb", "--read-only"])
    assert result.exit_code == 0, result.output
    token = result.stdout.strip().splitlines()[-1]
    narrowed = {"Authorization": f"Bearer {token}"}
    assert [p["name"] for p in team.client.get("/api/projects", headers=narrowed).json] == ["pb"]
    assert_problem(team.client.delete("/api/projects/pb", headers=narrowed), 403, "read-only")
    missing = cli.invoke(args=["tokens", "create", "bob", "--project", "nope"])
    assert missing.exit_code == 1 and "nope" in missing.output
