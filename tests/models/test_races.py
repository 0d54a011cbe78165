"""CREATE MODEL racing itself, through REST and SQL at once, from real threads."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pytest
from sqlalchemy import delete, event, select

from app.extensions import db
from app.store import MLModel, Project
from tests.helpers import assert_problem
from tests.models.conftest import wait_for

RACERS = 8


def _race(app, query: str) -> list[object]:
    """Half the racers POST the statement to the REST route, half to the SQL endpoint."""
    barrier = threading.Barrier(RACERS)

    def send(i: int) -> object:
        client = app.test_client()
        barrier.wait()
        if i % 2:
            return client.post("/api/projects/p1/models", json={"query": query}).status_code
        body = client.post("/api/sql/query", json={"query": query}).get_json()
        return body.get("error_message") or body["type"]

    with ThreadPoolExecutor(RACERS) as pool:
        return list(pool.map(send, range(RACERS)))


@pytest.mark.parametrize("clause", ["CREATE OR REPLACE MODEL", "CREATE MODEL IF NOT EXISTS"])
def test_replace_and_if_not_exists_never_answer_name_taken(app, p1, clause):
    # Two requests both passed the delete (OR REPLACE) or the lookup (IF NOT EXISTS) before
    # either inserted; the loser's insert hit the unique name and answered 409 "already
    # exists", which those statements are written never to say.
    query = f"{clause} p1.twin FROM demo (SELECT * FROM iris) PREDICT species " \
            "USING time_budget_s = 1"
    outcomes = _race(app, query)
    assert sorted(map(str, outcomes)) == ["201"] * (RACERS // 2) + ["table"] * (RACERS // 2)
    models = p1.get("/api/projects/p1/models").get_json()
    assert [m["name"] for m in models] == ["twin"]
    assert wait_for(p1, "twin")["status"] == "complete"


def test_plain_create_race_still_answers_409_to_all_but_one(app, p1):
    outcomes = _race(app, "CREATE MODEL p1.twin FROM demo (SELECT * FROM iris) PREDICT species "
                          "USING time_budget_s = 1")
    assert outcomes.count(201) + outcomes.count("table") == 1
    taken = [o for o in outcomes if o not in (201, "table")]
    assert all(o == 409 or "already exists" in str(o) for o in taken), outcomes
    assert len(p1.get("/api/projects/p1/models").get_json()) == 1
    assert wait_for(p1, "twin")["status"] == "complete"


def test_create_in_a_project_deleted_meanwhile_answers_404_not_name_taken(app, p1):
    # The project is deleted by another connection after this request looked it up, just
    # before its insert: the foreign key refuses the row. That is "project not found", not
    # the "model already exists" the unique-name path answers.
    def delete_project_elsewhere(mapper, connection, target):
        with db.engine.connect() as other:
            other.execute(delete(Project).where(Project.id == target.project_id))
            other.commit()

    event.listen(MLModel, "before_insert", delete_project_elsewhere)
    try:
        for clause in ("CREATE MODEL", "CREATE OR REPLACE MODEL"):
            p1.post("/api/projects", json={"name": "p1"})
            response = p1.post("/api/projects/p1/models", json={
                "query": f"{clause} p1.m FROM demo (SELECT * FROM iris) PREDICT species"})
            assert_problem(response, 404, "project")
    finally:
        event.remove(MLModel, "before_insert", delete_project_elsewhere)
    with app.app_context():
        assert db.session.scalars(select(MLModel)).all() == []
