"""Model versions as MindsDB has them: RETRAIN, FINETUNE, the active version, per-version
SELECT / DESCRIBE / DROP, over SQL and REST, on both stores."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import select

from app.extensions import db
from app.sql.errors import ErrorCode
from app.store import MLModel
from tests.helpers import assert_problem
from tests.models.conftest import IRIS_SQL, create, wait_for
from tests.models.test_failures import SLOW_SELECT

ROW = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}


def sql(client, query: str, db_name: str = "p1") -> dict:
    return client.post("/api/sql/query", json={"query": query, "context": {"db": db_name}}
                       ).get_json()


def table(answer: dict) -> list[dict]:
    assert answer["type"] == "table", answer
    return [dict(zip(answer["column_names"], row, strict=True)) for row in answer["data"]]


def versions(client, name: str = "m") -> dict[int, dict]:
    records = client.get("/api/projects/p1/models").get_json()
    return {r["version"]: r for r in records if r["name"] == name}


@pytest.fixture
def trained(p1):
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    return p1


def test_retrain_makes_version_two_active_and_keeps_one(trained):
    p1 = trained
    answer = sql(p1, "RETRAIN p1.m USING join_learn_process = true")
    record = table(answer)[0]
    assert record["VERSION"] == 2 and record["STATUS"] == "complete"
    found = versions(p1)
    assert (found[1]["active"], found[2]["active"]) == (False, True)
    # The stored query and options were used again.
    assert found[2]["fetch_data_query"] == found[1]["fetch_data_query"]
    assert found[2]["training_options"]["target"] == "species"
    # Every version is listed with its status and accuracy.
    shown = table(sql(p1, "SHOW MODELS"))
    assert sorted((r["NAME"], r["VERSION"], r["ACTIVE"], r["STATUS"]) for r in shown) == [
        ("m", 1, False, "complete"), ("m", 2, True, "complete")]
    assert all(r["ACCURACY"] > 0.8 for r in shown)
    # Each version answers by its number, over SQL and REST.
    for query in ("SELECT species FROM p1.m.1 WHERE sepal_length = 5.1 AND "
                  "sepal_width = 3.5 AND petal_length = 1.4 AND petal_width = 0.2",
                  "SELECT species FROM m.2 WHERE sepal_length = 5.1 AND sepal_width = 3.5 "
                  "AND petal_length = 1.4 AND petal_width = 0.2"):
        assert table(sql(p1, query)) == [{"species": "setosa"}]
    joined = table(sql(p1, "SELECT t.species AS truth, v.species AS guess FROM demo.iris AS t "
                           "JOIN p1.m.1 AS v LIMIT 5"))
    assert len(joined) == 5 and all(r["guess"] == r["truth"] for r in joined)
    for ref in ("m.1", "m.2"):
        out = p1.post(f"/api/projects/p1/models/{ref}/predict", json={"data": [ROW]})
        assert out.status_code == 200 and out.get_json()[0]["species"] == "setosa"
        described = p1.get(f"/api/projects/p1/models/{ref}/describe")
        assert described.status_code == 200 and described.get_json()[0]["accuracies"]
    describe = table(sql(p1, "DESCRIBE p1.m.1"))
    assert describe[0]["VERSION"] == 1 and describe[0]["ACTIVE"] is False
    assert table(sql(p1, "DESCRIBE p1.m.2.features"))


def test_inactive_retrain_then_set_active_and_drop_rules(trained):
    p1 = trained
    record = table(sql(p1, "RETRAIN p1.m FROM demo (SELECT * FROM iris WHERE species <> "
                           "'virginica') USING join_learn_process = true, active = false"))[0]
    assert record["VERSION"] == 2 and record["STATUS"] == "complete"
    found = versions(p1)
    assert (found[1]["active"], found[2]["active"]) == (True, False)
    assert "virginica" in found[2]["fetch_data_query"]
    # The active version cannot be dropped alone.
    answer = sql(p1, "DROP MODEL p1.m.1")
    assert answer["type"] == "error" and answer["error_code"] == ErrorCode.CONFLICT, answer
    assert "active" in answer["error_message"].lower()
    assert_problem(p1.delete("/api/projects/p1/models/m.1"), 409, "active")
    # SET model_active switches; the version without a number follows it.
    assert sql(p1, "SET model_active = m.2")["type"] == "ok"
    assert (versions(p1)[1]["active"], versions(p1)[2]["active"]) == (False, True)
    assert p1.get("/api/projects/p1/models/m").get_json()["version"] == 2
    assert sql(p1, "SET model_active = p1.m.7")["error_code"] == ErrorCode.NOT_FOUND
    assert sql(p1, "DROP MODEL m.1")["type"] == "ok"
    assert sorted(versions(p1)) == [2]
    assert sql(p1, "DROP MODEL p1.m")["type"] == "ok"
    assert versions(p1) == {}


def test_failed_retrain_leaves_the_active_version_serving(trained):
    p1 = trained
    # The query is checked and accepted, but its target is constant: training fails.
    answer = sql(p1, "RETRAIN p1.m FROM demo (SELECT sepal_length, sepal_width, 'x' AS "
                     "species FROM iris) USING join_learn_process = true")
    assert answer["type"] == "error", answer
    found = versions(p1)
    assert found[2]["status"] == "error" and found[2]["active"] is False
    assert found[1]["active"] is True
    out = p1.post("/api/projects/p1/models/m/predict", json={"data": [ROW]})
    assert out.status_code == 200 and out.get_json()[0]["species"] == "setosa"
    # An errored version may be dropped; a new RETRAIN is not blocked by it.
    assert table(sql(p1, "RETRAIN p1.m USING join_learn_process = true"))[0]["VERSION"] == 3


def test_finetune_refits_on_base_rows_plus_new_rows(trained):
    p1 = trained
    record = table(sql(p1, "FINETUNE p1.m FROM demo (SELECT * FROM iris LIMIT 30) "
                           "USING join_learn_process = true"))[0]
    assert record["VERSION"] == 2 and record["STATUS"] == "complete"
    model = p1.get("/api/projects/p1/models/m.2").get_json()
    assert model["base_version"] == 1 and model["active"] is True
    assert model["progress"]["phase"] == "complete"
    assert model["progress"]["rows_read"] == 180
    info = p1.get("/api/projects/p1/models/m.2/describe").get_json()[0]
    assert info["finetune"]["from_version"] == 1 and "refit" in info["finetune"]["method"]
    # How many rows trained the stored model (base 150 + new 30), and how many measured it
    # (below 100 000 rows every row is scored out of fold).
    assert info["final_model_rows"] == 180 and info["evaluation"]["rows_scored"] == 180
    assert p1.get("/api/projects/p1/models/m.1/describe").get_json()[0][
        "final_model_rows"] == 150
    # FINETUNE without new rows is refused, naming what is missing.
    assert_problem(p1.post("/api/projects/p1/models/m/finetune", json={}), 422, "new rows")
    assert sorted(versions(p1)) == [1, 2]


def test_rest_retrain_finetune_and_active_version(trained):
    p1 = trained
    out = p1.post("/api/projects/p1/models/m/retrain",
                  json={"using": {"join_learn_process": True, "active": False}})
    assert out.status_code == 201 and out.get_json()["version"] == 2
    assert out.get_json()["status"] == "complete" and out.get_json()["active"] is False
    out = p1.post("/api/projects/p1/models/m.1/finetune",
                  json={"query": "SELECT * FROM demo.iris WHERE species = 'setosa'",
                        "using": {"join_learn_process": True}})
    assert out.status_code == 201, out.get_json()
    assert out.get_json()["version"] == 3 and out.get_json()["base_version"] == 1
    put = p1.put("/api/projects/p1/models/m", json={"active_version": 2})
    assert put.status_code == 200 and put.get_json()["version"] == 2
    assert [v for v, r in versions(p1).items() if r["active"]] == [2]
    assert_problem(p1.put("/api/projects/p1/models/m", json={"active_version": 9}), 404)
    assert_problem(p1.put("/api/projects/p1/models/m", json={"active_version": "2"}), 400,
                   "active_version")
    assert_problem(p1.post("/api/projects/p1/models/nope/retrain", json={}), 404, "nope")
    assert_problem(p1.post("/api/projects/p1/models/m/retrain",
                           json={"using": {"colour": 1}}), 422, "colour")
    assert sorted(versions(p1)) == [1, 2, 3]  # refused requests stored nothing


def test_second_retrain_while_one_trains_is_409(make_app):
    p1 = make_app(SQL_TIMEOUT_S=5).test_client()
    p1.post("/api/projects", json={"name": "p1"})
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    first = p1.post("/api/projects/p1/models/m/retrain",
                    json={"query": f"SELECT * FROM demo.iris, ({SLOW_SELECT}) AS s"})
    assert first.status_code == 201, first.get_json()
    assert_problem(p1.post("/api/projects/p1/models/m/retrain", json={}), 409, "training")
    answer = sql(p1, "RETRAIN p1.m")
    assert answer["error_code"] == ErrorCode.CONFLICT
    # Meanwhile version 1 keeps answering.
    out = p1.post("/api/projects/p1/models/m/predict", json={"data": [ROW]})
    assert out.status_code == 200
    wait_for(p1, "m.2", statuses=("error",), timeout_s=30)
    assert versions(p1)[1]["active"] is True


def test_retrain_racing_drop_leaves_no_orphan(make_app, store_url):
    app = make_app()
    p1 = app.test_client()
    p1.post("/api/projects", json={"name": "p1"})
    for round_ in range(4):
        name = f"r{round_}"
        assert create(p1, IRIS_SQL.format(name=name)).status_code == 201
        outcomes: dict[str, int] = {}
        barrier = threading.Barrier(2)

        def call(kind: str, name: str = name, barrier: threading.Barrier = barrier,
                 outcomes: dict[str, int] = outcomes) -> None:
            client = app.test_client()
            barrier.wait()
            if kind == "retrain":
                response = client.post(f"/api/projects/p1/models/{name}/retrain", json={})
            else:
                response = client.delete(f"/api/projects/p1/models/{name}")
            outcomes[kind] = response.status_code

        threads = [threading.Thread(target=call, args=(k,)) for k in ("retrain", "drop")]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert outcomes["drop"] == 204 and outcomes["retrain"] in (201, 404), outcomes
        with app.app_context():
            left = db.session.scalars(select(MLModel.version).where(
                MLModel.name_key == name)).all()
        assert left == [], (outcomes, left)


def test_two_retrains_at_once_one_trains_the_other_is_409(make_app):
    app = make_app()
    p1 = app.test_client()
    p1.post("/api/projects", json={"name": "p1"})
    assert create(p1, IRIS_SQL.format(name="m")).status_code == 201
    barrier = threading.Barrier(2)
    answers: list = []

    def retrain() -> None:
        client = app.test_client()
        barrier.wait()
        response = client.post("/api/projects/p1/models/m/retrain", json={})
        answers.append((response.status_code, response.get_json()))

    threads = [threading.Thread(target=retrain) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(code for code, _ in answers) == [201, 409], answers
    refused = next(body for code, body in answers if code == 409)
    assert "training" in refused["detail"], refused
    assert wait_for(p1, "m.2")["status"] == "complete"
    assert sorted(versions(p1)) == [1, 2]  # one new version, not two
