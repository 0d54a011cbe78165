"""The predict path's model lookup: one narrow statement while this process holds the
unpacked model, the artifact read only when it does not, and no stale model served when
another instance on the same store activates, retrains or drops a version."""

from __future__ import annotations

from sqlalchemy import event

from app.extensions import db
from app.services.models import preload_models
from tests.helpers import assert_problem
from tests.models.conftest import IRIS_SQL, create

SETOSA = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
PREDICT = "/api/projects/p1/models/{}/predict"


def guess(client, ref: str = "m") -> str:
    answer = client.post(PREDICT.format(ref), json={"data": [SETOSA]})
    assert answer.status_code == 200, answer.get_json()
    return answer.get_json()[0]["species"]


def sql(client, query: str) -> dict:
    answer = client.post("/api/sql/query", json={"query": query, "context": {"db": "p1"}})
    assert answer.get_json()["type"] != "error", answer.get_json()
    return answer.get_json()


def test_cached_model_is_one_statement_without_the_artifact(p1, count_statements):
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    with count_statements() as first:
        assert guess(p1) == "setosa"
    # Not unpacked in this process yet: the lookup, then the artifact by its id.
    assert len(first) == 2, first.statements
    assert "artifact" not in first.statements[0] and "artifact" in first.statements[1]
    with count_statements() as cached:
        assert guess(p1) == "setosa"
        assert guess(p1, "m.1") == "setosa"
    assert len(cached) == 2, cached.statements
    assert not any("artifact" in s for s in cached.statements)


def test_another_instance_activating_retraining_or_dropping_is_seen_at_once(make_app):
    serving, other = make_app().test_client(), make_app().test_client()
    assert serving.post("/api/projects", json={"name": "p1"}).status_code == 201
    assert create(serving, IRIS_SQL.format(name="m")).status_code == 201
    assert guess(serving) == "setosa" and guess(other) == "setosa"  # both have it unpacked
    # Version 2 never saw a setosa: a setosa row gets another species from it.
    sql(other, "RETRAIN p1.m FROM demo (SELECT * FROM iris WHERE species <> 'setosa') "
               "USING join_learn_process = true, active = false")
    assert guess(serving) == "setosa" and guess(serving, "m.2") != "setosa"
    sql(other, "SET model_active = m.2")
    assert guess(serving) != "setosa"  # the first predict after the switch
    assert guess(serving, "m.1") == "setosa"
    sql(other, "SET model_active = m.1")
    assert guess(serving) == "setosa"
    # A retrain made active (the default) answers the next predict too.
    sql(other, "RETRAIN p1.m FROM demo (SELECT * FROM iris WHERE species <> 'setosa') "
               "USING join_learn_process = true")
    assert guess(serving) != "setosa"
    sql(other, "DROP MODEL p1.m")
    for ref in ("m", "m.1", "m.3"):
        assert_problem(serving.post(PREDICT.format(ref), json={"data": [SETOSA]}), 404,
                       "not found")


def test_preloaded_models_are_served_without_reading_the_artifact(p1, make_app):
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    sql(p1, "RETRAIN p1.m USING join_learn_process = true, active = false")
    fresh = make_app()  # as a gunicorn master does before forking
    with fresh.app_context():
        assert preload_models() == 1  # the active version only
        engine = db.engine
    statements: list[str] = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", record)
    try:
        assert guess(fresh.test_client()) == "setosa"
        assert len(statements) == 1 and "artifact" not in statements[0], statements
        assert guess(fresh.test_client(), "m.2") == "setosa"  # not preloaded: read now
        assert any("artifact" in s for s in statements[1:]), statements
    finally:
        event.remove(engine, "before_cursor_execute", record)
