"""/metrics and the readiness probe: who may read them, what they count, and Prometheus
figures added up over every gunicorn worker."""

from __future__ import annotations

import re

import pytest
import requests

from app.services import auth as auth_service
from tests.auth.conftest import PASSWORD, sign_in
from tests.helpers import assert_problem
from tests.live import quarry_env, serving

ELSEWHERE = {"REMOTE_ADDR": "10.1.2.3"}


def _value(text: str, name: str, **labels: str) -> float:
    """The sum of the samples of ``name`` whose labels include ``labels``."""
    total = 0.0
    for line in text.splitlines():
        match = re.fullmatch(r"([a-z_]+)(\{(.*)\})? (\S+)", line)
        if not match or match.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="([^"]*)"', match.group(3) or ""))
        if all(found.get(k) == v for k, v in labels.items()):
            total += float(match.group(4))
    return total


def test_metrics_count_requests_statements_and_sign_in_failures(make_auth_app):
    app = make_auth_app(DEMO_SOURCE=True)
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        token = auth_service.create_token("root", "t")[1]
    client = app.test_client()
    bearer = {"Authorization": f"Bearer {token}"}
    for _ in range(3):
        client.get("/api/projects", headers=bearer)
    client.post("/api/sql/query", json={"query": "SELECT * FROM demo.iris LIMIT 7"},
                headers=bearer)
    client.post("/api/sql/query", json={"query": "SELECT nosuch FROM demo.iris"},
                headers=bearer)
    assert sign_in(client, "root", "wrong password").status_code == 401
    response = client.get("/metrics")
    assert response.status_code == 200 and response.mimetype == "text/plain"
    text = response.get_data(as_text=True)
    assert _value(text, "quarry_http_requests_total", route="/api/projects", method="GET",
                  status="200") == 3
    assert _value(text, "quarry_http_requests_total", route="/api/login", status="401") == 1
    assert _value(text, "quarry_sql_statements_total", source="demo", outcome="ok") == 1
    assert _value(text, "quarry_sql_statements_total", source="demo", outcome="error") == 1
    assert _value(text, "quarry_sql_rows_returned_total", source="demo") == 7
    assert _value(text, "quarry_sql_statement_duration_seconds_count", source="demo") == 2
    assert _value(text, "quarry_sign_in_failures_total") == 1
    # Every connection taken for the statements went back to the pool.
    assert 'quarry_source_pool_connections_in_use{source="demo"}' in text
    assert _value(text, "quarry_source_pool_connections_in_use", source="demo") == 0


def test_probes_are_open_to_allowed_addresses_and_admins_only(make_auth_app):
    app = make_auth_app()
    with app.app_context():
        auth_service.create_user("root", PASSWORD, admin=True)
        auth_service.create_user("alice", PASSWORD)
        root = auth_service.create_token("root", "t")[1]
        alice = auth_service.create_token("alice", "t")[1]
    client = app.test_client()
    for path in ("/metrics", "/api/util/readiness"):
        assert client.get(path).status_code == 200  # loopback
        assert_problem(client.get(path, environ_base=ELSEWHERE), 403, "METRICS_ALLOW")
        assert_problem(client.get(path, environ_base=ELSEWHERE,
                                  headers={"Authorization": f"Bearer {alice}"}), 403)
        assert client.get(path, environ_base=ELSEWHERE,
                          headers={"Authorization": f"Bearer {root}"}).status_code == 200
    # The liveness probe stays open to everyone.
    assert client.get("/api/util/ping", environ_base=ELSEWHERE).status_code == 200
    assert client.get("/api/util/readiness").get_json() == {"status": "ok", "store": "ok"}


def test_allow_list_takes_networks_and_the_proxys_client_address(make_auth_app):
    client = make_auth_app(METRICS_ALLOW="10.0.0.0/8, 192.0.2.7", PROXY_HOPS=1).test_client()
    forwarded = {"X-Forwarded-For": "192.0.2.7"}
    assert client.get("/metrics", environ_base=ELSEWHERE).status_code == 200
    # Behind one trusted proxy, the address it reports is the client's.
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.1"},
                      headers=forwarded).status_code == 200
    assert client.get("/metrics", environ_base={"REMOTE_ADDR": "203.0.113.1"},
                      headers={"X-Forwarded-For": "203.0.113.9"}).status_code == 403
    # Loopback is no longer in the list.
    assert client.get("/metrics").status_code == 403


def test_readiness_answers_503_when_the_store_is_down(make_app, tmp_path):
    app = make_app(DATABASE_URL="postgresql+psycopg://postgres@127.0.0.1:1/none")
    response = app.test_client().get("/api/util/readiness")
    assert_problem(response, 503, "store")
    assert app.test_client().get("/api/util/ping").status_code == 200


@pytest.mark.slow
@pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)
def test_metrics_add_up_every_gunicorn_worker(store_url, tmp_path, session_dir):
    shared = tmp_path / "metrics"
    shared.mkdir()
    env = quarry_env(QUARRY_DATABASE_URL=store_url, QUARRY_INSTANCE_PATH=str(tmp_path),
                     QUARRY_DEMO_PATH=f"{session_dir}/demo.db",
                     QUARRY_WORKERS="3", QUARRY_THREADS="2", PROMETHEUS_MULTIPROC_DIR=str(shared))
    with serving(env, tmp_path / "logs") as server:
        count = 40
        for _ in range(count):
            # A new connection each time: the kernel spreads them over the workers.
            response = requests.post(server.url + "/api/sql/query",
                                     json={"query": "SELECT 1 AS one"},
                                     headers={"Connection": "close"}, timeout=10)
            assert response.json()["data"] == [[1]]
        # Each worker writes files of its own, named by its process id.
        workers = {re.sub(r"\D", "", p.name) for p in shared.glob("counter_*.db")}
        assert len(workers) >= 2, workers
        text = requests.get(server.url + "/metrics", timeout=10).text
        assert _value(text, "quarry_http_requests_total", route="/api/sql/query",
                      status="200") == count
        assert _value(text, "quarry_sql_statements_total", outcome="ok") == count
