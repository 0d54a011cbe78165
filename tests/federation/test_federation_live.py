"""A federated statement seen and stopped from another process: two gunicorn instances on
one PostgreSQL store, instance A (two workers) running the statement, instance B listing
and cancelling it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack

import pytest
import requests
from flask_migrate import upgrade

from app import create_app
from app.extensions import db
from tests.conftest import pg_database
from tests.live import quarry_env, serving

from .conftest import SPLIT_DB, _pg

pytestmark = pytest.mark.slow
CANCELLED = 22


@pytest.fixture(scope="module")
def instances(tmp_path_factory, fed_sources) -> Iterator[tuple[str, str]]:
    tmp = tmp_path_factory.mktemp("fed-live")
    with _pg(SPLIT_DB) as conn:  # about 60 s to read: it sleeps in every row
        conn.execute("CREATE VIEW slow_live AS SELECT g + length(pg_sleep(0.3)::text) "
                     "AS id FROM generate_series(1, 200) g")
    with pg_database("quarry_fed_store") as store:
        app = create_app({"DATABASE_URL": store, "INSTANCE_PATH": str(tmp),
                          "DEMO_SOURCE": False, "TESTING": True})
        with app.app_context():
            upgrade()
            db.engine.dispose()
        sources = json.dumps({k: v for k, v in fed_sources.items() if k != "one"})
        envs = [quarry_env(QUARRY_DATABASE_URL=store, QUARRY_INSTANCE_PATH=str(tmp / name),
                           QUARRY_DATA_SOURCES=sources, QUARRY_DEMO_SOURCE="false",
                           QUARRY_WORKERS=workers, QUARRY_THREADS="4",
                           QUARRY_FEDERATION_MEMORY=str(128 * 1024 * 1024))
                for name, workers in (("a", "2"), ("b", "1"))]
        with ExitStack() as stack, ThreadPoolExecutor(2) as pool:
            urls = list(pool.map(lambda args: stack.enter_context(serving(*args)).url,
                                 [(envs[0], tmp / "a"), (envs[1], tmp / "b")]))
            yield urls[0], urls[1]


def _listed(url: str, sql: str) -> list[dict]:
    return [q for q in requests.get(url + "/api/sql/queries", timeout=5).json()
            if q["statement"] == sql]


def test_another_instance_lists_the_legs_and_its_cancel_stops_them(instances):
    a, b = instances
    sql = "SELECT s.id, c.name FROM pg.slow_live s JOIN maria.customers c ON c.id = s.id"
    answers: list = []
    thread = threading.Thread(target=lambda: answers.append(requests.post(
        a + "/api/sql/query", json={"query": sql}, timeout=60)))
    thread.start()
    try:
        # B has never run the statement: what it lists comes from the store. The
        # customers' leg (6 rows) ends at once; the slow leg is still running.
        listed: list[dict] = []
        deadline = time.monotonic() + 40  # the store's copy, on a machine however busy
        while time.monotonic() < deadline:
            listed = _listed(b, sql)
            if listed and [leg["state"] for leg in listed[0].get("legs", [])] == \
                    ["running", "done"]:
                break
            time.sleep(0.1)
        assert len(listed) == 1, listed  # once
        item = listed[0]
        assert item["source"] == "pg, maria"
        assert [(leg["source"], leg["state"]) for leg in item["legs"]] == \
            [("pg", "running"), ("maria", "done")], item
        assert item["legs"][0]["sql"].startswith('SELECT "s"."id" FROM slow_live')
        assert item["legs"][1]["sql"].startswith("SELECT `c`.`id`, `c`.`name` FROM "
                                                 "customers")
        assert item["legs"][1]["rows"] == 6
        # Instance A's other worker sees the same (the store's copy, or its own).
        for _ in range(4):
            assert [leg["source"] for leg in _listed(a, sql)[0]["legs"]] == ["pg", "maria"]
        asked = time.monotonic()
        response = requests.delete(f"{b}/api/sql/queries/{item['query_id']}", timeout=10)
        assert response.status_code == 200, response.text
        thread.join(15)
        assert not thread.is_alive()
        assert time.monotonic() - asked < 3
    finally:
        thread.join(30)
    body = answers[0].json()
    assert body["type"] == "error" and body["error_code"] == CANCELLED, body
    with _pg(SPLIT_DB) as conn:
        left = conn.execute("SELECT count(*) FROM pg_stat_activity WHERE query LIKE %s "
                            "AND pid <> pg_backend_pid()",
                            (f"%{item['query_id']}%",)).fetchone()[0]
    assert left == 0
    assert _listed(b, sql) == []
