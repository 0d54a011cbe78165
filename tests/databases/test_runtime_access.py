"""Data sources created at run time: the account check (privileged_role) and the one name
space shared with projects, held by the store even when two instances race."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from tests.helpers import assert_problem

from .conftest import database_body


def _names(client) -> list[str]:
    return [d["name"].lower() for d in client.get("/api/databases").get_json()]


def test_a_superuser_account_is_refused_when_the_option_says_refuse(db_client, pg_db):
    body = database_body("su_refused", "postgres", {**pg_db, "privileged_role": "refuse"},
                         check=False)
    problem = assert_problem(db_client.post("/api/databases", json=body), 400, "superuser",
                             "refuse")
    assert problem["title"] == "Privileged account"
    assert "su_refused" not in _names(db_client)
    # In SQL too, and the store is left as it was.
    answer = db_client.post("/api/sql/query", json={"query": (
        "CREATE DATABASE su_refused WITH ENGINE = 'postgres', PARAMETERS = "
        f"{{\"host\": \"127.0.0.1\", \"port\": 5432, \"user\": \"postgres\", "
        f"\"database\": \"{pg_db['database']}\", \"privileged_role\": \"refuse\"}}")}).get_json()
    assert answer["type"] == "error" and "superuser" in answer["error_message"]
    assert "su_refused" not in _names(db_client)
    # An unknown mode is bad input.
    bad = database_body("su_bad", "postgres", {**pg_db, "privileged_role": "maybe"})
    assert_problem(db_client.post("/api/databases", json=bad), 400, "privileged_role")


def test_a_superuser_account_is_warned_about_in_the_answer_and_the_status(db_client, pg_db):
    created = db_client.post("/api/databases", json=database_body("su_warned", "postgres",
                                                                  pg_db, check=False))
    assert created.status_code == 201, created.get_json()
    view = created.get_json()
    assert view["role_check"] == "privileged" and view["privileged_role"] == "warn"
    assert any("superuser" in w for w in view["warnings"])
    assert "privileged_role" not in view["connection_data"]
    status = {s["name"]: s for s in db_client.get("/api/status").get_json()["data_sources"]}
    assert status["su_warned"]["role_check"] == "privileged"
    assert any("superuser" in w for w in status["su_warned"]["warnings"])
    # Unreachable at creation: not checked, and said so.
    down = db_client.post("/api/databases", json=database_body(
        "su_down", "postgres", {**pg_db, "port": 1}, check=False)).get_json()
    assert down["role_check"] == "unknown" and down["warnings"] == []


def test_a_project_and_a_database_of_one_name_never_both_win(db_app, other_app, pg_db):
    """Two instances (two apps on one store) race a project and a data source of one name:
    exactly one wins, every time, and the other answers 409."""
    project_side, database_side = db_app.test_client(), other_app().test_client()
    for attempt in range(12):
        name = f"same_{attempt}"
        barrier = threading.Barrier(2)

        def project(name=name, barrier=barrier):
            barrier.wait()
            return project_side.post("/api/projects", json={"name": name}).status_code

        def database(name=name, barrier=barrier):
            barrier.wait()
            return database_side.post("/api/databases", json=database_body(
                name, "postgres", pg_db, check=False)).status_code

        with ThreadPoolExecutor(2) as pool:
            statuses = sorted(f.result() for f in (pool.submit(project),
                                                   pool.submit(database)))
        assert statuses == [201, 409], (name, statuses)
        assert _names(project_side).count(name) == 1
