"""The console's page, its headers, and the routes it uses, through Flask's test client."""

from __future__ import annotations

import gzip

import pytest

from app.console import CONTENT_SECURITY_POLICY
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
    assert policy == CONTENT_SECURITY_POLICY
    assert "default-src 'self'" in policy and "frame-ancestors 'none'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy
    page = answer.get_data(as_text=True)
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


def test_a_cookie_signed_change_needs_the_csrf_header(signed_in):
    client, token = signed_in
    entry = {"statement": "SELECT 1", "outcome": "table", "row_count": 1}
    refused = client.post("/api/console/history", json=entry)
    assert refused.status_code == 403
    assert "X-Quarry-CSRF" in refused.get_json()["detail"]
    assert client.get("/api/console/history").get_json() == []  # nothing was kept
    # Reads need no header; Bearer callers need none either, with or without the cookie.
    assert client.get("/api/console/history").status_code == 200
    by_bearer = client.post("/api/console/history", json=entry,
                            headers={"Authorization": f"Bearer {token}"})
    assert by_bearer.status_code == 201
    by_cookie = client.post("/api/console/history", json=entry, headers={"X-Quarry-CSRF": "1"})
    assert by_cookie.status_code == 201
    assert len(client.get("/api/console/history").get_json()) == 2
    # A wrong value is no header.
    assert client.post("/api/logout", headers={"X-Quarry-CSRF": "yes"}).status_code == 403
    assert client.post("/api/logout", headers={"X-Quarry-CSRF": "1"}).status_code == 200


def test_history_is_per_user_searchable_and_checked(signed_in, make_app):
    client, _ = signed_in
    headers = {"X-Quarry-CSRF": "1"}
    for statement, outcome in (("SELECT * FROM demo.iris", "table"),
                               ("SELECT nope FROM demo.iris", "error"), ("SHOW DATABASES", "ok")):
        assert client.post("/api/console/history", headers=headers, json={
            "statement": statement, "outcome": outcome}).status_code == 201
    found = client.get("/api/console/history?q=IRIS").get_json()
    assert [r["statement"] for r in found] == ["SELECT nope FROM demo.iris",
                                               "SELECT * FROM demo.iris"]
    # LIKE's wildcards are literal in a search.
    assert client.get("/api/console/history?q=%25").get_json() == []
    bad = client.post("/api/console/history", headers=headers,
                      json={"statement": "", "outcome": "done", "row_count": -1})
    assert bad.status_code == 400
    assert set(bad.get_json()["errors"]) == {"statement", "outcome", "row_count"}
    assert client.delete("/api/console/history", headers=headers).status_code == 204
    assert client.get("/api/console/history").get_json() == []


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
    assert schema["projects"][0] == {"name": "mindsdb", "models": []}


def test_a_missing_browser_is_said_loudly(monkeypatch):
    monkeypatch.setattr("tests.console.conftest.CHROMIUM", "/nonexistent/chromium")
    assert "BROWSER TESTS SKIPPED" in browser_missing()
