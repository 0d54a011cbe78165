"""The role × route matrix: for every route of the app (walked from ``url_map``), what an
admin, a project's owner, editor and viewer, a member outside the project, and an anonymous
caller get — through HTTP with real API tokens. A route without a rule here fails the suite:
adding a route means deciding who may use it. docs/access.md shows the same table."""

from __future__ import annotations

import io
import os
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD

ROLES = ("admin", "owner", "editor", "viewer", "outsider", "anonymous")
PID = os.getpid()
RDB = f"rdb_{PID}"
# A one-second training budget: the matrix checks who may train, not how well; the default
# search took about 6 s of CPU per model, and a store's matrix trains ten of them (most in
# the background, beside the calls it measures).
CREATE_MODEL = ("CREATE MODEL {p}.{m} FROM demo (SELECT * FROM iris) PREDICT species "
                "USING join_learn_process = {wait}, time_budget_s = 1")

# Outcome rows, in the order of ROLES.
OPEN = (200, 200, 200, 200, 200, 200)
SIGNED = (200, 200, 200, 200, 200, 401)
READ = (200, 200, 200, 200, 404, 401)
WRITE = (200, 200, 200, 403, 404, 401)
CREATE = (201, 201, 201, 403, 404, 401)
DELETE = (204, 204, 204, 403, 404, 401)
OWN = (200, 200, 403, 403, 404, 401)
OWN_DELETE = (204, 204, 403, 403, 404, 401)
ADMIN = (200, 403, 403, 403, 403, 401)
ADMIN_CREATE = (201, 403, 403, 403, 403, 401)
ADMIN_DELETE = (204, 403, 403, 403, 403, 401)
ADMIN_READ = (200, 404, 404, 404, 404, 401)  # a private source: not shown to members
NO_FILE = (404, 404, 404, 404, 404, 401)
NO_ENDPOINT = (422, 422, 422, 422, 404, 401)


@dataclass
class Case:
    expect: tuple[int, ...]
    path: str
    json: Any = None
    query: dict[str, str] = field(default_factory=dict)
    # Run by the admin before each role's call (a fresh object for a delete, …).
    prepare: Callable[[Any, str], None] | None = None
    # A multipart form (made anew for each call: its file part is read once).
    form: Callable[[], dict[str, Any]] | None = None


_PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
_QUESTION = {"messages": [{"question": "How many?", "answer": None}]}


def _skill(name="s"):
    return {"skill": {"name": name, "type": "retrieval", "params": {"source": "kb"}}}


def _agent(name="a"):
    return {"agent": {"name": name, "model_name": "m", "skills": ["s"]}}


def _prepare_skill(m, tag):
    m.admin("POST", "/api/projects/p/skills", _skill(f"s_{tag}"))


def _prepare_agent(m, tag):
    m.admin("POST", "/api/projects/p/agents", _agent(f"a_{tag}"))


def _prepare_model(m, tag):
    m.admin("POST", "/api/projects/p/models",
            {"query": CREATE_MODEL.format(p="p", m=f"m_{tag}", wait="false")})


def _prepare_project(m, tag):
    m.admin("POST", "/api/projects", {"name": f"d_{tag}"})
    for member in ("owner", "editor", "viewer"):
        m.admin("PUT", f"/api/projects/d_{tag}/members/{member}", {"role": member})


def _prepare_member(m, tag):
    m.admin("PUT", "/api/projects/p/members/extra", {"role": "viewer"})


def _prepare_database(m, tag):
    m.admin("POST", "/api/databases", _database(f"{RDB}_{tag}"))


def _prepare_saved(m, tag):
    m.admin("POST", "/api/console/projects/p/saved", {"name": f"q_{tag}", "statement": "SELECT 1"})


def _prepare_view(m, tag):
    m.admin("POST", "/api/projects/p/views", _view(f"d_{tag}"))


def _prepare_knowledge_base(m, tag):
    m.admin("POST", "/api/projects/p/knowledge_bases", {"knowledge_base": {"name": f"d_{tag}"}})


def _job(name: str) -> dict[str, Any]:
    return {"job": {"name": name, "query": "SELECT count(*) FROM demo.iris",
                    "start_at": "2099-01-01", "schedule_str": "every day"}}


def _prepare_job(m, tag):
    m.admin("POST", "/api/projects/p/jobs", _job(f"d_{tag}"))


def _view(name: str) -> dict[str, Any]:
    return {"view": {"name": name, "query": "SELECT 1 AS x"}}


def _csv_form() -> dict[str, Any]:
    return {"file": (io.BytesIO(b"a,b\n1,2\n"), "t.csv"), "source_type": "file"}


def _prepare_file(m, tag):
    response = m.call("admin", "PUT", f"/api/files/f_{tag}", form=_csv_form)
    assert response.status_code == 200, response.get_data(as_text=True)


def _database(name):
    return {"database": {"name": name, "engine": "sqlite",
                         "parameters": {"db_file": f"{RDB}.sqlite"}}}


# endpoint (blueprint name without _unprefixed) → {method: (role → Case)}
def cases(role: str, prefix: str, tag: str = "") -> dict[tuple[str, str], Case]:
    """The case of each (endpoint, method) for ``role``; ``prefix`` is "" or "/api"; ``tag``
    makes the names of objects a call creates or deletes unique."""
    tag = tag or role
    P = f"{prefix}/projects/p"
    return {
        ("static", "GET"): Case(NO_FILE, "/static/nothing.txt"),
        ("api-docs.openapi_json", "GET"): Case(SIGNED, "/api/openapi.json"),
        ("status.get_status", "GET"): Case(OPEN, "/api/status"),
        ("status.ping", "GET"): Case(OPEN, "/api/util/ping"),
        # From loopback (QUARRY_METRICS_ALLOW): open; test_metrics.py covers other addresses.
        ("status.readiness", "GET"): Case(OPEN, "/api/util/readiness"),
        ("metrics.get_metrics", "GET"): Case(OPEN, "/metrics"),
        ("auth.login", "POST"): Case((200,) * 6, "/api/login",
                                     {"username": "login_user", "password": PASSWORD}),
        ("auth.logout", "POST"): Case(SIGNED, "/api/logout"),
        ("projects.list_projects", "GET"): Case(SIGNED, "/api/projects"),
        ("projects.create_project", "POST"): Case((201, 201, 201, 201, 201, 401),
                                                  "/api/projects", {"name": f"new_{tag}"}),
        ("projects.get_project", "GET"): Case(READ, "/api/projects/p"),
        ("projects.delete_project", "DELETE"): Case(OWN_DELETE, f"/api/projects/d_{tag}",
                                                    prepare=_prepare_project),
        ("skills.list_skills", "GET"): Case(READ, f"{P}/skills"),
        ("skills.create_skill", "POST"): Case(CREATE, f"{P}/skills", _skill(f"n_{tag}")),
        ("skills.get_skill", "GET"): Case(READ, f"{P}/skills/s"),
        ("skills.put_skill", "PUT"): Case(WRITE, f"{P}/skills/s",
                                          {"skill": {"params": {"source": tag}}}),
        ("skills.delete_skill", "DELETE"): Case(DELETE, f"{P}/skills/s_{tag}",
                                                prepare=_prepare_skill),
        ("agents.list_agents", "GET"): Case(READ, f"{P}/agents"),
        ("agents.create_agent", "POST"): Case(CREATE, f"{P}/agents", _agent(f"n_{tag}")),
        ("agents.get_agent", "GET"): Case(READ, f"{P}/agents/a"),
        ("agents.update_agent", "PUT"): Case(WRITE, f"{P}/agents/a",
                                             {"agent": {"params": {"k": tag}}}),
        ("agents.delete_agent", "DELETE"): Case(DELETE, f"{P}/agents/a_{tag}",
                                                prepare=_prepare_agent),
        ("agents.delete_agent_singular", "DELETE"): Case(DELETE, f"{P}/agent/a_{tag}",
                                                         prepare=_prepare_agent),
        ("models.list_models", "GET"): Case(READ, "/api/projects/p/models"),
        ("models.create_model", "POST"): Case(
            CREATE, "/api/projects/p/models",
            {"query": CREATE_MODEL.format(p="p", m=f"n_{tag}", wait="false")}),
        ("models.get_model", "GET"): Case(READ, "/api/projects/p/models/m"),
        ("models.delete_model", "DELETE"): Case(DELETE, f"/api/projects/p/models/m_{tag}",
                                                prepare=_prepare_model),
        # Retraining is a change (editors and owners); each call waits for its version, so
        # the next role's call finds no version training (which would be 409).
        ("models.retrain_model", "POST"): Case(
            CREATE, "/api/projects/p/models/m/retrain",
            {"using": {"join_learn_process": True, "time_budget_s": 1}}),
        ("models.finetune_model", "POST"): Case(
            CREATE, "/api/projects/p/models/m/finetune",
            {"query": "SELECT * FROM demo.iris WHERE sepal_length > 6",
             "using": {"join_learn_process": True, "time_budget_s": 1}}),
        ("models.update_model", "PUT"): Case(WRITE, "/api/projects/p/models/m",
                                             {"active_version": 1}),
        ("models.describe_model", "GET"): Case(READ, "/api/projects/p/models/m/describe"),
        ("models.predict_model", "POST"): Case(
            READ, "/api/projects/p/models/m/predict",
            {"data": [{"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4,
                       "petal_width": 0.2}]}),
        ("sql.run_query", "POST"): Case(SIGNED, "/api/sql/query", {"query": "SELECT 1"}),
        ("access.list_members", "GET"): Case(READ, "/api/projects/p/members"),
        ("access.set_member", "PUT"): Case(OWN, "/api/projects/p/members/extra",
                                           {"role": "viewer"}),
        ("access.remove_member", "DELETE"): Case(OWN_DELETE, "/api/projects/p/members/extra",
                                                 prepare=_prepare_member),
        ("access.list_audit", "GET"): Case(ADMIN, "/api/audit", query={"limit": "5"}),
        ("databases.list_databases", "GET"): Case(SIGNED, "/api/databases"),
        ("databases.create_database", "POST"): Case(ADMIN_CREATE, "/api/databases",
                                                    _database(f"{RDB}_new_{tag}")),
        ("databases.check_database", "POST"): Case(
            ADMIN, "/api/databases/status", {"engine": "sqlite", "db_file": f"{RDB}.sqlite"}),
        ("databases.get_database", "GET"): Case(ADMIN_READ, f"/api/databases/{RDB}"),
        ("databases.update_database", "PUT"): Case(
            ADMIN, f"/api/databases/{RDB}",
            {"database": {"parameters": {"db_file": f"{RDB}.sqlite"}}}),
        ("databases.delete_database", "DELETE"): Case(
            ADMIN_DELETE, f"/api/databases/{RDB}_{tag}", prepare=_prepare_database),
        ("databases.list_tables", "GET"): Case(ADMIN_READ, f"/api/databases/{RDB}/tables"),
        ("views.list_views", "GET"): Case(READ, f"{P}/views"),
        ("views.create_view", "POST"): Case(CREATE, f"{P}/views", _view(f"v_{tag}")),
        ("views.get_view", "GET"): Case(READ, f"{P}/views/v"),
        ("views.update_view", "PUT"): Case(WRITE, f"{P}/views/v",
                                           {"view": {"query": "SELECT 2 AS x"}}),
        ("views.delete_view", "DELETE"): Case(DELETE, f"{P}/views/d_{tag}",
                                              prepare=_prepare_view),
        ("files.list_files", "GET"): Case(SIGNED, "/api/files/"),
        ("files.upload_file", "PUT"): Case(ADMIN, f"/api/files/u_{tag}", form=_csv_form),
        ("files.delete_file", "DELETE"): Case((200, 403, 403, 403, 403, 401),
                                              f"/api/files/f_{tag}",
                                              prepare=_prepare_file),
        ("knowledge_bases.list_knowledge_bases", "GET"): Case(READ, f"{P}/knowledge_bases"),
        ("knowledge_bases.create_knowledge_base", "POST"): Case(
            CREATE, f"{P}/knowledge_bases", {"knowledge_base": {"name": f"k_{tag}"}}),
        ("knowledge_bases.get_knowledge_base", "GET"): Case(READ, f"{P}/knowledge_bases/k"),
        ("knowledge_bases.insert_into_knowledge_base", "PUT"): Case(
            WRITE, f"{P}/knowledge_bases/k",
            {"knowledge_base": {"rows": [{"id": tag, "content": "a note"}]}}),
        ("knowledge_bases.delete_knowledge_base", "DELETE"): Case(
            DELETE, f"{P}/knowledge_bases/d_{tag}", prepare=_prepare_knowledge_base),
        ("jobs.list_jobs", "GET"): Case(READ, f"{P}/jobs"),
        ("jobs.create_job", "POST"): Case(CREATE, f"{P}/jobs", _job(f"j_{tag}")),
        ("jobs.get_job", "GET"): Case(READ, f"{P}/jobs/j"),
        ("jobs.job_history", "GET"): Case(READ, f"{P}/jobs/j/history"),
        ("jobs.drop_job", "DELETE"): Case(DELETE, f"{P}/jobs/d_{tag}", prepare=_prepare_job),
        ("knowledge_bases.knowledge_base_completion", "POST"): Case(
            READ, f"{P}/knowledge_bases/k/completions", {"query": "a note", "type": "context"}),
        ("tree.list_tree", "GET"): Case(SIGNED, "/api/tree"),
        ("tree.list_tree_item", "GET"): Case(READ, "/api/tree/p"),
        # Streamed answers' running statements: each user sees and stops their own.
        ("sql.list_queries", "GET"): Case(SIGNED, "/api/sql/queries"),
        ("sql.cancel_query", "DELETE"): Case(NO_FILE, "/api/sql/queries/nothing-runs"),
        # The console: its page and files are open (the page signs in through the API).
        ("console.show_console", "GET"): Case(OPEN, "/console"),
        ("console.console_asset", "GET"): Case(OPEN, "/console/static/console.css"),
        ("console_api.get_schema", "GET"): Case(SIGNED, "/api/console/schema"),
        ("console_api.list_history", "GET"): Case(SIGNED, "/api/console/history"),
        ("console_api.clear_history", "DELETE"): Case((204, 204, 204, 204, 204, 401),
                                                      "/api/console/history"),
        ("console_api.list_saved_queries", "GET"): Case(READ, "/api/console/projects/p/saved"),
        ("console_api.save_query", "POST"): Case(
            (201, 201, 201, 201, 404, 401), "/api/console/projects/p/saved",
            {"name": f"n_{tag}", "statement": "SELECT 1"}),
        ("console_api.delete_saved_query", "DELETE"): Case(
            (204, 204, 204, 204, 404, 401), f"/api/console/projects/p/saved/q_{tag}",
            prepare=_prepare_saved),
        # MCP: any signed-in user (each tool then applies the caller's rights); an agent's
        # tool set is read like the agent.
        ("mcp.serve_mcp", "POST"): Case(SIGNED, "/mcp", _PING),
        ("mcp.serve_agent_mcp", "POST"): Case(READ, "/mcp/projects/p/agents/a", _PING),
        # Agent "a" names no model endpoint (and QUARRY_LLM_BASE_URL is not set): 422 to
        # whoever may read it.
        ("completions.complete_agent", "POST"): Case(NO_ENDPOINT, f"{P}/agents/a/completions",
                                                     _QUESTION),
        ("completions.stream_agent_completion", "POST"): Case(
            NO_ENDPOINT, f"{P}/agents/a/completions/stream", _QUESTION),
    }


class Matrix:
    def __init__(self, app):
        self.app = app
        self.client = app.test_client()
        self.headers: dict[str, dict[str, str]] = {"anonymous": {}}
        with app.app_context():
            auth_service.create_user("root", PASSWORD, admin=True)
            for name in ("owner", "editor", "viewer", "outsider", "extra", "login_user"):
                auth_service.create_user(name, PASSWORD)
            for role, user in zip(ROLES[:-1], ("root", "owner", "editor", "viewer",
                                               "outsider"), strict=True):
                token = auth_service.create_token(user, "matrix")[1]
                self.headers[role] = {"Authorization": f"Bearer {token}"}

    def call(self, role: str, method: str, path: str, json: Any = None, query=None,
             form: Callable[[], dict[str, Any]] | None = None):
        if form is not None:
            return self.client.open(path, method=method, data=form(), query_string=query,
                                    headers=self.headers[role],
                                    content_type="multipart/form-data")
        return self.client.open(path, method=method, json=json, query_string=query,
                                headers=self.headers[role])

    def admin(self, method: str, path: str, json: Any = None) -> None:
        response = self.call("admin", method, path, json)
        assert response.status_code < 300, (method, path, response.get_data(as_text=True))


def _endpoints(app) -> set[tuple[str, str]]:
    found = set()
    for rule in app.url_map.iter_rules():
        endpoint = rule.endpoint.replace("_unprefixed.", ".")
        for method in rule.methods - {"HEAD", "OPTIONS"}:
            found.add((endpoint, method, rule.rule.startswith("/api") or "/projects/" not in
                       rule.rule))
    return found


@pytest.fixture
def matrix(make_auth_app, session_dir) -> Matrix:
    path = os.path.join(session_dir, f"{RDB}.sqlite")
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE IF NOT EXISTS t (x INTEGER)")
    conn.close()
    m = Matrix(make_auth_app(DEMO_SOURCE=True, SQLITE_ROOTS=session_dir))
    m.call("owner", "POST", "/api/projects", {"name": "p"})
    for role in ("editor", "viewer"):
        assert m.call("owner", "PUT", f"/api/projects/p/members/{role}",
                      {"role": role}).status_code == 200
    m.admin("POST", "/api/projects/p/skills", _skill("s"))
    m.admin("POST", "/api/projects/p/models",
            {"query": CREATE_MODEL.format(p="p", m="m", wait="true")})
    m.admin("POST", "/api/projects/p/agents", _agent("a"))
    m.admin("POST", "/api/databases", _database(RDB))
    m.admin("POST", "/api/projects/p/views", _view("v"))
    m.admin("POST", "/api/projects/p/knowledge_bases", {"knowledge_base": {"name": "k"}})
    m.admin("POST", "/api/projects/p/jobs", _job("j"))
    return m


def test_every_route_has_a_rule_and_every_role_gets_it(matrix):
    rules = cases("admin", "/api")
    routes = _endpoints(matrix.app)
    missing = sorted({(e, m) for e, m, _ in routes} - set(rules))
    assert not missing, f"routes without a rule in the role matrix: {missing}"
    failures = []
    for number, (endpoint, method, prefixed) in enumerate(sorted(routes)):
        for index, role in enumerate(ROLES):
            tag = f"{role}_{number}"
            case = cases(role, "/api" if prefixed else "", tag)[(endpoint, method)]
            if case.prepare is not None:
                case.prepare(matrix, tag)
            response = matrix.call(role, method, case.path, case.json, case.query, case.form)
            if response.status_code != case.expect[index]:
                failures.append(f"{role:9} {method:6} {case.path}: {response.status_code}, "
                                f"expected {case.expect[index]} "
                                f"{response.get_data(as_text=True)[:160]}")
    assert not failures, "\n".join(failures)


def test_the_docs_table_matches_the_rules():
    """docs/access.md lists every rule with the same outcomes."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "access.md").read_text("utf-8")
    for (endpoint, method), case in cases("admin", "/api").items():
        row = f"| {method} | `{endpoint}` | " + " | ".join(map(str, case.expect)) + " |"
        assert row in doc, f"docs/access.md lacks the row: {row}"
