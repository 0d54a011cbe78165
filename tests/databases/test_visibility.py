"""Two apps on one store (two workers, or two instances): what one creates, changes or drops,
the other's very next request sees, also when it read the list a moment before (no timer)."""

from __future__ import annotations

import os

from .conftest import database_body, make_sqlite


def _query(client, query: str, db: str | None = None) -> dict:
    body = {"query": query, **({"context": {"db": db}} if db else {})}
    response = client.post("/api/sql/query", json=body)
    assert response.status_code == 200, response.get_data(as_text=True)
    return response.get_json()


def test_the_other_worker_sees_each_change_at_its_next_request(db_client, other_app):
    instance = db_client.application.instance_path
    make_sqlite(os.path.join(instance, "one.db"), rows=3)
    make_sqlite(os.path.join(instance, "two.db"), rows=5)
    other = other_app().test_client()
    # The other worker has read the list (and cached the gated statement) just now.
    assert _query(other, "SELECT count(*) FROM seen.t")["type"] == "error"
    assert [d["name"] for d in other.get("/api/databases").get_json()
            if d["type"] == "data"] == ["demo", "files"]

    created = db_client.post("/api/databases",
                             json=database_body("seen", "sqlite", {"db_file": "one.db"}))
    assert created.status_code == 201, created.get_json()
    assert _query(other, "SELECT count(*) FROM seen.t")["data"] == [[3]]
    assert _query(other, "SHOW DATABASES")["data"][-1] == ["seen"]
    # A view over it, made here and read there.
    view = _query(db_client, "CREATE VIEW mindsdb.seen_v AS (SELECT n FROM seen.t WHERE n > 1)")
    assert view["type"] == "ok", view
    assert _query(other, "SELECT n FROM mindsdb.seen_v")["data"] == [[2]]

    changed = db_client.put("/api/databases/seen", json=database_body(
        "seen", "sqlite", {"db_file": "two.db"}))
    assert changed.status_code == 200, changed.get_json()
    assert _query(other, "SELECT count(*) FROM seen.t")["data"] == [[5]]  # not the old pool

    assert _query(db_client, "DROP VIEW mindsdb.seen_v")["type"] == "ok"
    assert db_client.delete("/api/databases/seen").status_code == 204
    gone = _query(other, "SELECT count(*) FROM seen.t")
    assert gone["type"] == "error" and "'seen'" in gone["error_message"], gone
    assert other.get("/api/databases/seen").status_code == 404
