"""The console's page, its headers, and the routes it uses, through Flask's test client."""

from __future__ import annotations

import gzip
import io
import re
import sqlite3

import pytest
from sqlalchemy import func, select

from app.console import CONTENT_SECURITY_POLICY, page_policy
from app.extensions import db
from app.store import AuditRecord, ConsoleHistory
from tests.console.conftest import browser_missing

PASSWORD = "console api password"


@pytest.fixture
def signed_in(make_app):
    """An app with sign-in on, user alice, and a client holding her session cookie."""
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY="s" * 40)
    result = app.test_cli_runner().invoke(args=["users", "create", "alice"], input=PASSWORD + "\n")
    assert result.exit_code == 0, result.output
    client = app.test_client()
    answer = client.post("/api/login", json={"username": "alice", "password": PASSWORD})
    assert answer.status_code == 200
    return client, answer.get_json()["token"]


@pytest.mark.parametrize("path", ["/", "/console"])
def test_the_page_is_served_with_a_strict_policy(client, path):
    answer = client.get(path)
    assert answer.status_code == 200 and answer.mimetype == "text/html"
    policy = answer.headers["Content-Security-Policy"]
    page = answer.get_data(as_text=True)
    # The page's nonce (for CodeMirror's style element, web/src/editor.js) is in its policy,
    # new on every answer, and the page is never kept for a later one.
    (nonce,) = re.findall(r'<meta property="csp-nonce" nonce="([A-Za-z0-9_-]{24})">', page)
    assert policy == page_policy(nonce) != CONTENT_SECURITY_POLICY
    assert f"style-src 'self' 'nonce-{nonce}';" in policy
    assert answer.headers["Cache-Control"] == "no-store" and "ETag" not in answer.headers
    again = client.get(path)
    assert nonce not in again.get_data(as_text=True)
    assert nonce not in again.headers["Content-Security-Policy"]
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    # The page's assets need no nonce.
    asset = client.get("/console/static/console.css")
    assert asset.headers["Content-Security-Policy"] == CONTENT_SECURITY_POLICY
    # No inline script or style: only files from /console/static.
    assert "<script>" not in page and "<style" not in page and "style=" not in page
    assert 'src="/console/static/console.js"' in page


def test_assets_are_gzipped_for_browsers_that_accept_it(client):
    plain = client.get("/console/static/console.js")
    packed = client.get("/console/static/console.js", headers={"Accept-Encoding": "gzip"})
    assert plain.status_code == packed.status_code == 200
    assert packed.headers["Content-Encoding"] == "gzip" and "Accept-Encoding" in packed.vary
    assert gzip.decompress(packed.data) == plain.data
    assert packed.mimetype == plain.mimetype == "text/javascript"
    # The whole first load stays well under 300 KB compressed.
    assert len(packed.data) < 300_000
    assert b"@codemirror/view" in client.get("/console/static/LICENSES.txt").data
    assert client.get("/console/static/../__init__.py").status_code == 404


def test_the_page_is_open_and_the_api_is_not(make_app):
    client = make_app(AUTH_REQUIRED=True, SECRET_KEY="s" * 40).test_client()
    assert client.get("/").status_code == 200
    assert client.get("/console/static/console.css").status_code == 200
    assert client.get("/api/console/schema").status_code == 401
    assert client.get("/api/console/history").status_code == 401


def test_the_consoles_changes_are_judged_by_their_origin_not_a_header(signed_in):
    client, token = signed_in
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.post("/api/sql/query", json={"query": "SELECT 1"}, headers=bearer
                       ).status_code == 200
    # A page on another origin: refused whatever it adds, and nothing was forgotten.
    for headers in ({"Sec-Fetch-Site": "same-site"}, {"Origin": "http://localhost:9999"},
                    {"Sec-Fetch-Site": "cross-site", "X-Quarry-CSRF": "1"}):
        refused = client.delete("/api/console/history", headers=headers)
        assert refused.status_code == 403
        assert refused.get_json()["title"] == "Cross-origin request refused"
    assert len(client.get("/api/console/history").get_json()) == 1
    # The console's own page (same origin) needs no custom header; the old one is ignored.
    by_cookie = client.delete("/api/console/history", headers={"Sec-Fetch-Site": "same-origin"})
    assert by_cookie.status_code == 204
    assert client.get("/api/console/history").get_json() == []
    assert client.delete("/api/console/history", headers={"X-Quarry-CSRF": "yes"}
                         ).status_code == 204
    assert client.post("/api/logout", headers={"Sec-Fetch-Site": "same-origin",
                                               "Origin": "http://localhost"}).status_code == 200
    assert client.get("/api/console/history").status_code == 401


def _sql(client, query: str, token: str, **body) -> dict:
    answer = client.post("/api/sql/query", json={"query": query, **body},
                         headers={"Authorization": f"Bearer {token}"})
    assert answer.status_code == 200
    return answer


def test_the_server_keeps_every_clients_statements_per_user(signed_in):
    client, token = signed_in
    app = client.application
    made = app.test_cli_runner().invoke(args=["users", "create", "bob"], input="bob pass word\n")
    assert made.exit_code == 0, made.output
    bob = app.test_client().post("/api/login", json={"username": "bob",
                                                      "password": "bob pass word"}
                                 ).get_json()["token"]
    # Alice runs statements as a program would (Bearer, no console involved).
    _sql(client, "SELECT * FROM demo.iris LIMIT 4", token)
    _sql(client, "SELECT nope FROM demo.iris", token)
    _sql(client, "SHOW DATABASES", token)
    streamed = _sql(client, "SELECT species FROM demo.iris", token,
                    response_format="jsonlines")
    assert streamed.get_data().count(b"\n") >= 3
    _sql(client, "SELECT 1 AS bobs", bob)
    # The session cookie is alice's too: the console lists what her programs ran.
    mine = client.get("/api/console/history").get_json()
    assert [r["statement"] for r in mine] == [
        "SELECT species FROM demo.iris", "SHOW DATABASES", "SELECT nope FROM demo.iris",
        "SELECT * FROM demo.iris LIMIT 4"]
    stream, show, bad, table = mine
    assert (table["outcome"], table["row_count"], table["database"]) == ("table", 4, "demo")
    assert table["duration_ms"] >= 0 and table["ran_at"].endswith("+00:00")
    assert (bad["outcome"], bad["error_code"]) == ("error", 15)
    assert "nope" in bad["error_message"]
    assert show["outcome"] == "table"
    assert (stream["outcome"], stream["row_count"]) == ("table", 150)
    # Bob sees only his own.
    bobs = client.get("/api/console/history", headers={"Authorization": f"Bearer {bob}"})
    assert [r["statement"] for r in bobs.get_json()] == ["SELECT 1 AS bobs"]
    # Searchable by statement or error text, any case; LIKE's wildcards are literal.
    found = client.get("/api/console/history?q=IRIS").get_json()
    assert [r["statement"] for r in found] == ["SELECT species FROM demo.iris",
                                               "SELECT nope FROM demo.iris",
                                               "SELECT * FROM demo.iris LIMIT 4"]
    assert client.get("/api/console/history?q=%25").get_json() == []
    bad_args = client.get("/api/console/history?limit=0")
    assert bad_args.status_code == 400 and "limit" in bad_args.get_json()["errors"]["query"]
    # Clearing forgets alice's history only.
    assert client.delete("/api/console/history").status_code == 204
    assert client.get("/api/console/history").get_json() == []
    assert len(client.get("/api/console/history",
                          headers={"Authorization": f"Bearer {bob}"}).get_json()) == 1


def test_with_sign_in_off_one_anonymous_history_keeps_the_newest(client, monkeypatch):
    monkeypatch.setattr("app.services.audit.HISTORY_KEEP", 3)
    for n in range(5):
        assert client.post("/api/sql/query", json={"query": f"SELECT {n} AS n"}
                           ).get_json()["type"] == "table"
    kept = client.get("/api/console/history").get_json()
    assert [r["statement"] for r in kept] == ["SELECT 4 AS n", "SELECT 3 AS n", "SELECT 2 AS n"]
    assert all(r["database"] == "mindsdb" and r["row_count"] == 1 for r in kept)
    # The POST route of the first console is gone: the server records statements itself.
    assert client.post("/api/console/history",
                       json={"statement": "SELECT 1", "outcome": "ok"}).status_code == 405


def test_the_history_is_trimmed_every_few_statements(client, monkeypatch):
    # The trim runs with every TRIM_EVERY-th statement of a user; the list never shows more
    # than HISTORY_KEEP in between.
    monkeypatch.setattr("app.services.audit.HISTORY_KEEP", 3)
    monkeypatch.setattr("app.services.audit.TRIM_EVERY", 4)
    for n in range(10):
        client.post("/api/sql/query", json={"query": f"SELECT {n} AS n"})
        kept = client.get("/api/console/history").get_json()
        assert [r["statement"] for r in kept] == [f"SELECT {m} AS n"
                                                  for m in range(n, max(-1, n - 3), -1)]
        with client.application.app_context():
            stored = db.session.scalar(select(func.count()).select_from(ConsoleHistory))
        # Trimmed by the 1st, 5th and 9th statement: at most KEEP + TRIM_EVERY - 1 between.
        assert stored == min(n + 1, 3 + n % 4), (n, stored)


def test_saved_queries_per_project(client):
    body = {"name": "setosa", "statement": "SELECT 1", "database": "demo"}
    assert client.post("/api/console/projects/mindsdb/saved", json=body).status_code == 201
    again = client.post("/api/console/projects/mindsdb/saved",
                        json={**body, "name": "SETOSA", "statement": "SELECT 2"})
    assert again.status_code == 201
    saved = client.get("/api/console/projects/mindsdb/saved").get_json()
    assert [(s["name"], s["statement"]) for s in saved] == [("setosa", "SELECT 2")]
    bad = client.post("/api/console/projects/mindsdb/saved", json={**body, "name": "9 bad"})
    assert bad.status_code == 400 and "name" in bad.get_json()["errors"]
    assert client.post("/api/console/projects/nope/saved", json=body).status_code == 404
    assert client.delete("/api/console/projects/mindsdb/saved/setosa").status_code == 204
    assert client.delete("/api/console/projects/mindsdb/saved/setosa").status_code == 404


def test_the_schema_lists_tables_columns_and_models(client):
    schema = client.get("/api/console/schema").get_json()
    demo = next(s for s in schema["data_sources"] if s["name"] == "demo")
    iris = next(t for t in demo["tables"] if t["name"] == "iris")
    assert [c["name"] for c in iris["columns"]] == ["sepal_length", "sepal_width",
                                                    "petal_length", "petal_width", "species"]
    assert schema["projects"][0] == {"name": "mindsdb", "models": [], "views": []}


def test_the_schema_lists_views_with_columns_read_without_their_rows(client):
    def sql(query: str) -> dict:
        return client.post("/api/sql/query", json={"query": query}).get_json()

    # Every row of `boom` fails (abs of the smallest 64-bit integer): its columns can only be
    # read if none of its rows is.
    uploaded = client.put("/api/files/console_leaves?overwrite=true", data={
        "file": (io.BytesIO(b"leaf,len\noak,4\n"), "leaves.csv")},
        content_type="multipart/form-data")
    assert uploaded.status_code == 200, uploaded.get_data(as_text=True)
    made = [sql("CREATE VIEW mindsdb.boom AS (SELECT species, abs(-9223372036854775807 - "
                "(sepal_length > 0)) AS big FROM demo.iris)"),
            sql("CREATE VIEW mindsdb.petals AS (SELECT len FROM files.console_leaves)")]
    assert [m["type"] for m in made] == ["ok", "ok"], made
    assert sql("SELECT * FROM mindsdb.boom")["type"] == "error"
    assert client.delete("/api/files/console_leaves").status_code == 200
    history = len(client.get("/api/console/history").get_json())
    assert sql("CREATE VIEW mindsdb.whole AS (SELECT * FROM demo.iris)")["type"] == "ok"
    project = client.get("/api/console/schema").get_json()["projects"][0]
    views = {v["name"]: v for v in project["views"]}
    assert [v["name"] for v in project["views"]] == ["boom", "petals", "whole"]
    assert views["boom"] == {"name": "boom", "columns": [{"name": "species", "type": ""},
                                                         {"name": "big", "type": ""}]}
    assert [c["name"] for c in views["whole"]["columns"]] == [
        "sepal_length", "sepal_width", "petal_length", "petal_width", "species"]
    # A view that cannot be read (its file was deleted): listed, with why.
    assert views["petals"]["columns"] == [] and "console_leaves" in views["petals"]["error"]
    # Reading the columns is not a statement of the user's: no history row.
    assert len(client.get("/api/console/history").get_json()) == history + 1


def _admin_and_member(app):
    """A client of ``app``, and the bearer headers of an admin (root) and a member (bob)."""
    runner = app.test_cli_runner()
    for name, extra in (("root", ["--admin"]), ("bob", [])):
        made = runner.invoke(args=["users", "create", name, *extra], input=PASSWORD + "\n")
        assert made.exit_code == 0, made.output
    client = app.test_client()

    def bearer(user: str) -> dict[str, str]:
        token = client.post("/api/login", json={"username": user, "password": PASSWORD}
                            ).get_json()["token"]
        return {"Authorization": f"Bearer {token}"}

    return client, bearer("root"), bearer("bob")


def test_a_views_columns_are_read_with_the_readers_rights(make_app, tmp_path):
    private = tmp_path / "private.db"
    with sqlite3.connect(private) as conn:
        conn.execute("CREATE TABLE salaries (name TEXT, pay INTEGER)")
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY="s" * 40,
                   DATA_SOURCES={"payroll": {"url": f"sqlite:///{private}"}})
    client, root, bob = _admin_and_member(app)
    def views(headers: dict[str, str]) -> list[dict]:
        schema = client.get("/api/console/schema", headers=headers).get_json()
        return next(p for p in schema["projects"] if p["name"] == "mindsdb")["views"]

    made = client.post("/api/sql/query", headers=root, json={
        "query": "CREATE VIEW mindsdb.pay AS (SELECT name, pay FROM payroll.salaries)"})
    assert made.get_json()["type"] == "ok", made.get_json()
    assert views(root) == [{"name": "pay", "columns": [{"name": "name", "type": ""},
                                                       {"name": "pay", "type": ""}]}]
    # bob may not read the project: he sees none of its views.
    assert views(bob) == []
    granted = client.post("/api/sql/query", headers=root, json={
        "query": "GRANT viewer ON PROJECT mindsdb TO bob"}).get_json()
    assert granted["type"] == "ok", granted
    # Now he may, but not query payroll: the view is listed, its columns are not, and the
    # reason is the one reading it would give him.
    read = client.post("/api/sql/query", headers=bob,
                       json={"query": "SELECT * FROM mindsdb.pay"}).get_json()
    assert read["type"] == "error"
    assert views(bob) == [{"name": "pay", "columns": [], "error": read["error_message"]}]


def test_a_missing_browser_is_said_loudly(monkeypatch):
    monkeypatch.setattr("tests.console.conftest.CHROMIUM", "/nonexistent/chromium")
    assert "BROWSER TESTS SKIPPED" in browser_missing()


def test_the_schema_lists_runtime_sources_the_caller_may_query(make_app):
    app = make_app(AUTH_REQUIRED=True, SECRET_KEY="s" * 40)
    client, root, bob = _admin_and_member(app)
    made = client.post("/api/databases", headers=root, json={"database": {
        "name": "console_pg", "engine": "postgres", "parameters": {
            "host": "127.0.0.1", "port": 5432, "database": "test", "user": "postgres"}}})
    assert made.status_code == 201
    names = [s["name"] for s in client.get("/api/console/schema", headers=root
                                           ).get_json()["data_sources"]]
    assert "console_pg" in names and "demo" in names
    one = client.get("/api/console/schema?database=console_pg", headers=root).get_json()
    assert [(s["name"], s["dialect"]) for s in one["data_sources"]] == [
        ("console_pg", "postgresql")]
    missing = client.get("/api/console/schema?database=nope", headers=root)
    assert missing.status_code == 404 and "nope" in missing.get_json()["detail"]
    # A member without a grant on the new (private) source does not see its tables.
    seen = client.get("/api/console/schema", headers=bob).get_json()["data_sources"]
    assert "console_pg" not in [s["name"] for s in seen]
    # ... nor the source itself: it answers as a missing one.
    hidden = client.get("/api/console/schema?database=console_pg", headers=bob)
    assert hidden.status_code == 404
    assert hidden.get_json()["detail"] == missing.get_json()["detail"].replace("nope",
                                                                               "console_pg")


def test_a_long_context_db_is_kept_cut_and_the_audit_log_keeps_it_whole(signed_in):
    client, token = signed_in
    bearer = {"Authorization": f"Bearer {token}"}
    long_name = "x" * 300
    answer = client.post("/api/sql/query", headers=bearer, json={
        "query": "SELECT * FROM nowhere_table", "context": {"db": long_name}})
    assert answer.get_json()["type"] == "error"
    (entry,) = client.get("/api/console/history", headers=bearer).get_json()
    assert entry["database"] == long_name[:63] and entry["outcome"] == "error"
    with client.application.app_context():
        statements = [r.statement for r in db.session.scalars(
            select(AuditRecord).where(AuditRecord.kind == "sql"))]
    assert statements == ["SELECT * FROM nowhere_table"]
