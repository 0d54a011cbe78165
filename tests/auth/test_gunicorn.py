"""Quarry for real: gunicorn with gunicorn.conf.py, a migrated store, users from the CLI."""

from __future__ import annotations

import json
import socket
import sqlite3
import threading
import time

import pytest
import requests

from app import create_app
from app.config import load_settings
from app.extensions import db
from tests.live import flask, quarry_env, serving

PASSWORD = "gunicorn test password"
SECRET_KEY = "gunicorn-test-secret-" + "k" * 32

pytestmark = pytest.mark.slow


def _add_user_and_token(env: dict) -> str:
    # The same CLI commands as an operator's, run in this process: a `flask` process per
    # command would import the whole app again each time.
    app = create_app(load_settings(env))
    runner = app.test_cli_runner()
    # An admin: these tests query a configured (not public) data source.
    created = runner.invoke(args=["users", "create", "alice", "--admin"],
                            input=PASSWORD + "\n")
    assert created.exit_code == 0, created.output
    made = runner.invoke(args=["tokens", "create", "--user", "alice", "--label", "test"])
    assert made.exit_code == 0, made.output
    bob = runner.invoke(args=["users", "create", "bob"], input=PASSWORD + "\n")  # a member
    assert bob.exit_code == 0, bob.output
    with app.app_context():
        db.engine.dispose()
    return made.stdout.strip()


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """A gunicorn serving Quarry with sign-in on, behind one (pretend) proxy hop."""
    tmp = tmp_path_factory.mktemp("gunicorn")
    env = quarry_env(QUARRY_DATABASE_URL=f"sqlite:///{tmp}/store.db",
                     QUARRY_INSTANCE_PATH=str(tmp), QUARRY_DEMO_SOURCE="false",
                     QUARRY_AUTH_REQUIRED="true", QUARRY_SECRET_KEY=SECRET_KEY,
                     QUARRY_PROXY_HOPS="1", QUARRY_LOG_LEVEL="DEBUG", QUARRY_WORKERS="2",
                     QUARRY_THREADS="4", QUARRY_SQL_TIMEOUT_S="4",
                     QUARRY_DATA_SOURCES=json.dumps({"slow": f"sqlite:///{tmp}/slow.db"}))
    with sqlite3.connect(tmp / "slow.db") as conn:  # a few rows to train a model on
        conn.execute("CREATE TABLE flowers (width REAL, length REAL, kind TEXT)")
        conn.executemany("INSERT INTO flowers VALUES (?, ?, ?)",
                         [(i % 7, i % 5 + (i % 2) * 3, "ab"[i % 2]) for i in range(40)])
    conn.close()
    with sqlite3.connect(tmp / "extra.db") as conn:  # a database to connect at run time
        conn.execute("CREATE TABLE t (x INTEGER)")
    conn.close()
    flask(env, "db", "upgrade")
    api_token = _add_user_and_token(env)
    with serving(env, tmp) as live:
        yield {"url": live.url, "api_token": api_token, "live": live, "tmp": tmp,
               "secrets": [PASSWORD, api_token, SECRET_KEY]}


def _stop_and_read_logs(server) -> tuple[int, str, str]:
    code = server["live"].stop()  # SIGTERM, graceful: workers finish what they run, then exit
    return (code, (server["tmp"] / "stdout.log").read_text(),
            (server["tmp"] / "stderr.log").read_text())


def test_sign_in_with_a_cookie_jar(server):
    url = server["url"]
    jar = requests.Session()
    assert jar.get(url + "/api/projects").status_code == 401
    login = jar.post(url + "/api/login", json={"username": "alice", "password": PASSWORD},
                     headers={"X-Request-ID": "gunicorn-login-1"})
    assert login.status_code == 200
    server["secrets"] += [login.json()["token"], jar.cookies["session"]]
    cookie_header = login.headers["Set-Cookie"]
    assert "HttpOnly" in cookie_header and "SameSite=Lax" in cookie_header
    assert "Secure" not in cookie_header  # plain HTTP at the proxy
    assert jar.get(url + "/api/projects").status_code == 200
    assert jar.get(url + "/api/status").json()["auth"] == {"required": True, "signed_in": True}


# Every kind of change a Bearer caller makes, in an order where each finds what it needs.
COOKIE_JAR_CHANGES = [
    ("POST", "/api/projects", {"name": "jar"}, 201),
    ("POST", "/api/projects/jar/skills",
     {"skill": {"name": "notes", "type": "retrieval", "params": {"source": "kb"}}}, 201),
    ("PUT", "/api/projects/jar/skills/notes", {"skill": {"params": {"source": "kb2"}}}, 200),
    ("POST", "/api/projects/jar/agents", {"agent": {"name": "helper", "skills": ["notes"]}},
     201),
    ("PUT", "/api/projects/jar/agents/helper", {"agent": {"params": {"temperature": 0.2}}},
     200),
    ("DELETE", "/api/projects/jar/agents/helper", None, 204),
    ("DELETE", "/api/projects/jar/skills/notes", None, 204),
    ("PUT", "/api/projects/jar/members/bob", {"role": "viewer"}, 200),
    ("DELETE", "/api/projects/jar/members/bob", None, 204),
    ("POST", "/api/projects/jar/models",
     {"query": "CREATE MODEL kinds FROM slow (SELECT * FROM flowers) PREDICT kind "
               "USING join_learn_process = true, time_budget_s = 1"}, 201),
    ("POST", "/api/projects/jar/models/kinds/predict", {"data": [{"width": 1, "length": 4}]},
     200),
    ("PUT", "/api/projects/jar/models/kinds", {"active_version": 1}, 200),
    ("DELETE", "/api/projects/jar/models/kinds", None, 204),
    ("POST", "/api/databases/status", {"engine": "sqlite", "db_file": "extra.db"}, 200),
    ("POST", "/api/databases",
     {"database": {"name": "extra", "engine": "sqlite", "parameters": {"db_file": "extra.db"}}},
     201),
    ("PUT", "/api/databases/extra", {"database": {"parameters": {"db_file": "extra.db"}}}, 200),
    ("DELETE", "/api/databases/extra", None, 204),
    ("POST", "/api/sql/query", {"query": "SELECT count(*) AS n FROM flowers",
                                "context": {"db": "slow"}}, 200),
    ("POST", "/api/sql/query", {"query": "CREATE PROJECT jar_sql"}, 200),
    ("POST", "/api/sql/query", {"query": "DROP PROJECT jar_sql"}, 200),
    ("POST", "/api/console/projects/jar/saved",
     {"name": "count", "statement": "SELECT count(*) FROM flowers", "database": "slow"}, 201),
    ("DELETE", "/api/console/projects/jar/saved/count", None, 204),
    ("DELETE", "/api/console/history", None, 204),
    ("DELETE", "/api/sql/queries/3e1f9a4c0b6d4f0e8a2b7c5d9e1f3a5b", None, 404),  # none running
    ("DELETE", "/api/projects/jar", None, 204),
]


def test_a_program_with_a_cookie_jar_changes_what_a_bearer_caller_may(server):
    """A program that signs in and keeps the cookie (requests.Session, curl -b/-c) sends no
    Origin and no Sec-Fetch-Site: it is no browser, so every change is its to make."""
    url = server["url"]
    jar = requests.Session()
    assert jar.post(url + "/api/login", json={"username": "alice", "password": PASSWORD}
                    ).status_code == 200
    cookie = jar.cookies["session"]
    server["secrets"].append(cookie)
    for method, path, body, status in COOKIE_JAR_CHANGES:
        answer = jar.request(method, url + path, json=body, timeout=60)
        assert answer.status_code == status, (method, path, answer.text)
        if path == "/api/sql/query":
            assert answer.json()["type"] != "error", (body, answer.json())
    assert jar.get(url + "/api/console/history").json() == []  # the jar's DELETE cleared it
    assert "jar" not in {p["name"] for p in jar.get(url + "/api/projects").json()}
    # Logout by the cookie ends the session: the same cookie, sent again, signs nothing.
    assert jar.post(url + "/api/logout").status_code == 200
    stale = requests.Session()
    stale.cookies.set("session", cookie)
    for method, path in (("GET", "/api/projects"), ("POST", "/api/projects"),
                         ("POST", "/api/logout")):
        answer = stale.request(method, url + path, json={"name": "after_logout"})
        assert answer.status_code == 401, (method, path, answer.text)
        assert answer.headers["Content-Type"] == "application/problem+json"


def test_cookie_is_secure_when_the_proxy_reports_https(server):
    login = requests.post(server["url"] + "/api/login",
                          json={"username": "alice", "password": PASSWORD},
                          headers={"X-Forwarded-Proto": "https", "X-Forwarded-For": "192.0.2.1"})
    assert login.status_code == 200
    server["secrets"].append(login.json()["token"])
    assert "Secure" in login.headers["Set-Cookie"]
    assert "HttpOnly" in login.headers["Set-Cookie"]


def test_sign_in_with_tokens(server):
    url, token = server["url"], server["api_token"]
    assert requests.get(url + "/api/projects", headers={"X-Api-Key": token}).status_code == 200
    bearer = {"Authorization": f"Bearer {token}"}
    response = requests.get(url + "/api/projects", headers=bearer)
    assert response.status_code == 200 and response.headers["X-Request-ID"]
    wrong = requests.get(url + "/api/projects", headers={"X-Api-Key": token[:-2] + "zz"})
    assert wrong.status_code == 401
    assert wrong.headers["Content-Type"] == "application/problem+json"


def test_mindsdb_sdk_signs_in_with_a_password_and_with_an_api_key(server):
    from mindsdb_sdk.connectors.rest_api import RestAPI

    # The SDK posts to /cloud/login first, gets 404, then signs in at /api/login.
    by_password = RestAPI(server["url"], login="alice", password=PASSWORD)
    assert by_password.session.headers["Authorization"].startswith("Bearer qs_")
    server["secrets"].append(by_password.session.headers["Authorization"].split()[1])
    assert "mindsdb" in list(by_password.projects()["name"])
    by_key = RestAPI(server["url"], api_key=server["api_token"])
    assert "mindsdb" in list(by_key.projects()["name"])


SLOW_QUERY = ("WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
              "SELECT count(*) FROM c")


def test_two_slow_queries_do_not_freeze_the_api(server):
    url, headers = server["url"], {"X-Api-Key": server["api_token"]}
    answers = []

    def slow_query():
        answers.append(requests.post(url + "/api/sql/query", headers=headers, timeout=60,
                                     json={"query": SLOW_QUERY, "context": {"db": "slow"}}))

    threads = [threading.Thread(target=slow_query) for _ in range(2)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    for path in ("/api/status", "/api/projects"):
        quick = time.monotonic()
        assert requests.get(url + path, headers=headers, timeout=10).status_code == 200
        assert time.monotonic() - quick < 2.0, path
    for thread in threads:
        thread.join()
    assert time.monotonic() - started >= 3.5  # the queries really ran until the limit
    for answer in answers:
        body = answer.json()
        assert body["type"] == "error" and "time limit" in body["error_message"], body


def _raw_request(url: str, request: bytes) -> tuple[str, dict, bytes]:
    """Send ``request`` as written on a new connection; (status line, headers, body)."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    return status, {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines)}, body


@pytest.mark.parametrize("request_bytes, status, words", [
    (b"GET /api/projects/" + b"a" * 9000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414, "line"),
    (b"GET /api/status HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000 + b"\r\n\r\n", 431,
     "header"),
    (b"GET /api/status HTTP/1.1\r\nHost: x\r\n" + b"".join(
        b"X-H%d: v\r\n" % i for i in range(200)) + b"\r\n", 431, "headers"),
    (b"G<T /api/status HTTP/1.1\r\nHost: x\r\n\r\n", 400, "method"),
    (b"GET /api/status HTTP/9.9\r\nHost: x\r\n\r\n", 400, "version"),
])
def test_requests_gunicorn_refuses_get_a_problem_document_too(server, request_bytes, status,
                                                               words):
    """A request refused by gunicorn itself, before the app, is answered like the app's errors."""
    status_line, headers, body = _raw_request(server["url"], request_bytes)
    assert status_line.split()[1] == str(status), status_line
    assert headers["content-type"] == "application/problem+json"
    problem = json.loads(body)
    assert problem["status"] == status and problem["title"]
    assert words in problem["detail"].lower(), problem
    assert b"<html" not in body


def test_graceful_stop_lets_a_running_query_finish_then_logs_are_clean(server):
    wrong = requests.post(server["url"] + "/api/login",
                          json={"username": "alice", "password": "x" + PASSWORD},
                          headers={"X-Request-ID": "gunicorn-wrong-1"})
    assert wrong.status_code == 401
    server["secrets"].append("x" + PASSWORD)
    running = []
    query = threading.Thread(target=lambda: running.append(requests.post(
        server["url"] + "/api/sql/query", headers={"X-Api-Key": server["api_token"]},
        json={"query": SLOW_QUERY, "context": {"db": "slow"}}, timeout=60)))
    query.start()
    time.sleep(1.0)
    code, out, err = _stop_and_read_logs(server)  # SIGTERM while the query runs
    query.join()
    assert code == 0
    assert running[0].status_code == 200 and "time limit" in running[0].json()["error_message"]
    # Access log on stdout, with the request id; the app's own lines on stderr, with it too.
    assert any("[gunicorn-login-1]" in line and "/api/login" in line
               for line in out.splitlines())
    assert any("[gunicorn-wrong-1]" in line and "sign-in failed" in line
               for line in err.splitlines())
    assert "Booting worker" in err
    for secret in server["secrets"]:
        assert secret not in out and secret not in err, secret
