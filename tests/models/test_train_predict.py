"""Training on the demo data, describe in each shape, and predictions on known rows."""

import json

from tests.helpers import assert_problem
from tests.models.conftest import DIABETES_SQL, IRIS_SQL, create

# Rows of the iris data set with their true species.
SETOSA = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
VIRGINICA = {"sepal_length": 7.7, "sepal_width": 3.0, "petal_length": 6.1, "petal_width": 2.3}
VERSICOLOR = {"sepal_length": 6.4, "sepal_width": 3.2, "petal_length": 4.5, "petal_width": 1.5}


def test_iris_end_to_end(p1):
    """One training, then every read of it: record, describe, predict (training is slow)."""
    response = create(p1, IRIS_SQL.format(name="iris_model"))
    assert response.status_code == 201, response.get_json()
    iris = response.get_json()
    _check_record_and_info(p1, iris)
    _check_features_and_model(p1, iris)
    _check_attribute_rules(p1)
    _check_known_rows(p1)
    _check_wrong_types(p1)
    _check_lookup_and_delete(p1, iris)


def _check_lookup_and_delete(p1, iris):
    listed = p1.get("/api/projects/p1/models").get_json()
    assert [m["name"] for m in listed] == ["iris_model"]
    for ref in ("iris_model", "IRIS_MODEL", "iris_model.1", "Iris_Model.1"):
        response = p1.get(f"/api/projects/p1/models/{ref}")
        assert response.status_code == 200 and response.get_json()["id"] == iris["id"], ref
    assert_problem(p1.get("/api/projects/p1/models/iris_model.2"), 404, "iris_model.2")
    # Versions that are no integer SQLite can bind, or not ASCII digits, were a 500.
    for ref in ("iris_model.99999999999999999999999", "iris_model.²", "iris_model.٣"):
        assert_problem(p1.get(f"/api/projects/p1/models/{ref}"), 404, "iris_model")
        assert_problem(p1.delete(f"/api/projects/p1/models/{ref}"), 404, "iris_model")
        assert_problem(p1.post(f"/api/projects/p1/models/{ref}/predict",
                               json={"data": [SETOSA]}), 404, "iris_model")
    assert_problem(p1.get("/api/projects/p1/models/nope"), 404, "nope")
    assert_problem(p1.get("/api/projects/nope/models"), 404, "nope")

    assert p1.delete("/api/projects/p1/models/IRIS_model").status_code == 204
    assert_problem(p1.delete("/api/projects/p1/models/iris_model"), 404, "iris_model")
    assert_problem(p1.post("/api/projects/p1/models/iris_model/predict",
                           json={"data": [SETOSA]}), 404, "iris_model")
    assert p1.get("/api/projects/p1/models").get_json() == []
    # The name is free again (a model that fails at once: no second training here).
    again = create(p1, "CREATE MODEL p1.iris_model FROM demo (SELECT * FROM iris WHERE 1 = 0) "
                       "PREDICT species")
    assert again.status_code == 201 and again.get_json()["id"] != iris["id"]


def _check_record_and_info(p1, iris):
    assert iris["status"] == "complete"
    assert iris["name"] == "iris_model" and iris["version"] == 1 and iris["active"] is True
    assert iris["predict"] == "species" and iris["engine"] == "sklearn"
    assert iris["fetch_data_query"] == "SELECT * FROM iris"
    assert iris["accuracy"] >= 0.9 and iris["training_time"] > 0
    assert iris["training_options"]["target"] == "species"

    info = p1.get("/api/projects/p1/models/iris_model/describe").get_json()
    assert isinstance(info, list) and len(info) == 1
    info = info[0]
    assert info["accuracies"]["balanced_accuracy_score"] == iris["accuracy"]
    assert info["inputs"] == ["sepal_length", "sepal_width", "petal_length", "petal_width"]
    assert info["outputs"] == ["species"]
    importances = info["column_importances"]
    assert set(importances) == set(info["inputs"])
    # Shares of the total: the positive ones sum to 1 (up to rounding to 4 places).
    assert all(v <= 1.0 for v in importances.values())
    assert abs(sum(v for v in importances.values() if v > 0) - 1.0) <= 0.0005 * len(importances)
    assert set(info["column_importance_std"]) == set(importances)
    # The petals separate the species; the sepals barely do.
    top_two = sorted(importances, key=importances.get, reverse=True)[:2]
    assert set(top_two) == {"petal_length", "petal_width"}
    steps = info["model"].split(" --> ")
    assert steps[0].startswith("ColumnTransformer[") and "StandardScaler" in steps[0]
    assert steps[-1] in {"LogisticRegression", "RandomForestClassifier",
                         "HistGradientBoostingClassifier"}


def _check_features_and_model(p1, iris):
    features = p1.get("/api/projects/p1/models/iris_model/describe",
                      json={"attribute": "features"}).get_json()
    assert [f["column"] for f in features] == ["sepal_length", "sepal_width", "petal_length",
                                               "petal_width", "species"]
    assert all(set(f) >= {"column", "type", "encoder", "role"} for f in features)
    assert [f["role"] for f in features] == ["feature"] * 4 + ["target"]
    assert features[0]["type"] == "float" and "StandardScaler" in features[0]["encoder"]
    assert features[-1]["type"] == "categorical"

    candidates = p1.get("/api/projects/p1/models/iris_model/describe?attribute=model").get_json()
    assert len(candidates) >= 3
    assert all(set(c) >= {"name", "performance", "training_time", "selected",
                          "accuracy_functions"} for c in candidates)
    selected = [c for c in candidates if c["selected"] == 1]
    assert len(selected) == 1 and sum(c["selected"] for c in candidates) == 1
    # The selected candidate is the simplest (linear, boosting, forest) of those scored on
    # every fold whose mean is within one standard error of the best one's, and its
    # cross-validated score is the accuracy.
    finished = [c for c in candidates if c["folds_scored"] == c["folds"] and c["error"] is None]
    best = max(finished, key=lambda c: c["performance"])
    assert selected[0] in finished and selected[0]["folds"] % 5 == 0
    assert selected[0]["performance"] >= best["performance"] - best["performance_se"] - 1e-4
    rank = {"LogisticRegression": 0, "HistGradientBoostingClassifier": 1,
            "RandomForestClassifier": 2}
    near = [c for c in finished
            if c["performance"] >= best["performance"] - best["performance_se"] - 1e-4]
    assert rank[selected[0]["name"]] == min(rank[c["name"]] for c in near)
    search = p1.get("/api/projects/p1/models/iris_model/describe").get_json()[0]["search"]
    assert search["choice"]["standard_error"] == best["performance_se"]
    assert search["choice"]["best_mean"] == best["performance"]
    assert selected[0]["performance"] == iris["accuracy"]
    assert selected[0]["name"] == \
        p1.get("/api/projects/p1/models/iris_model/describe").get_json()[0]["model"] \
        .split(" --> ")[-1]
    assert candidates[0]["accuracy_functions"] == ["balanced_accuracy_score"]


def _check_attribute_rules(p1):
    info = p1.get("/api/projects/p1/models/iris_model/describe?attribute=info").get_json()
    assert info == p1.get("/api/projects/p1/models/iris_model/describe").get_json()
    # The JSON body wins over the query string (it is the published form).
    body = p1.get("/api/projects/p1/models/iris_model/describe?attribute=info",
                  json={"attribute": "features"}).get_json()
    assert body[0]["column"] == "sepal_length"
    bad = p1.get("/api/projects/p1/models/iris_model/describe", json={"attribute": "jsonai"})
    assert_problem(bad, 400, "jsonai", "info", "features", "model")
    assert_problem(p1.get("/api/projects/p1/models/iris_model/describe?attribute=bogus"),
                   400, "bogus")
    assert_problem(p1.get("/api/projects/p1/models/nope/describe"), 404, "nope")
    assert_problem(p1.get("/api/projects/nope/models/iris_model/describe"), 404, "nope")


def _check_known_rows(p1):
    rows = [SETOSA, VERSICOLOR, VIRGINICA]
    response = p1.post("/api/projects/p1/models/iris_model/predict", json={"data": rows})
    assert response.status_code == 200, response.get_json()
    answers = response.get_json()
    assert [a["species"] for a in answers] == ["setosa", "versicolor", "virginica"]
    for row, answer in zip(rows, answers, strict=True):
        assert {k: answer[k] for k in row} == row  # the input columns come back
        assert 0.5 < answer["species_confidence"] <= 1.0
        explain = json.loads(answer["species_explain"])
        assert explain["predicted_value"] == answer["species"]
        assert explain["confidence"] == answer["species_confidence"]

    # One row as an object; a missing column is imputed; an unknown one is ignored.
    one = p1.post("/api/projects/p1/models/iris_model/predict",
                  json={"data": {"petal_length": 1.3, "petal_width": 0.2, "colour": "blue"}})
    assert one.status_code == 200
    assert one.get_json()[0]["colour"] == "blue"
    assert one.get_json()[0]["species"] == "setosa"


def _check_wrong_types(p1):
    # A value the model cannot read (text, a list, an object, infinity, a number beyond a
    # float) no longer fails the batch (it was a 422 for all the rows): its row is predicted
    # with that input unknown, and its explanation says so.
    bad_values = ["wide", [1], {"a": 1}, "2,5", "inf", "-Infinity", 10 ** 400]
    rows = [SETOSA] + [{**SETOSA, "petal_width": bad} for bad in bad_values]
    response = p1.post("/api/projects/p1/models/iris_model/predict", json={"data": rows})
    assert response.status_code == 200, response.get_json()
    answers = response.get_json()
    assert "unknown_inputs" not in json.loads(answers[0]["species_explain"])
    for answer in answers[1:]:
        assert answer["species"] in ("setosa", "versicolor", "virginica")
        unknown = json.loads(answer["species_explain"])["unknown_inputs"]
        assert list(unknown) == ["petal_width"] and "not a number" in unknown["petal_width"]
    # Iris has no gaps: a missing value (null, or a key not sent) is unknown too.
    gaps = p1.post("/api/projects/p1/models/iris_model/predict",
                   json={"data": [{**SETOSA, "petal_width": None}, {"petal_length": 1.4}]})
    assert gaps.status_code == 200, gaps.get_json()
    first, second = (json.loads(a["species_explain"])["unknown_inputs"]
                     for a in gaps.get_json())
    assert list(first) == ["petal_width"] and "missing" in first["petal_width"]
    assert set(second) == {"sepal_length", "sepal_width", "petal_width"}
    # Not rows at all: 400.
    assert_problem(p1.post("/api/projects/p1/models/iris_model/predict", json={"data": 3}),
                   400, "data")
    assert_problem(p1.post("/api/projects/p1/models/iris_model/predict", json={}), 400, "data")
    # The list is checked in one pass (JsonObjects): any item that is not an object, first
    # or last, still refuses the whole body with the same message.
    for bad in ([1, 2], [SETOSA, "x"], [SETOSA, [SETOSA]], [None], "rows", None, True):
        body = assert_problem(p1.post("/api/projects/p1/models/iris_model/predict",
                                      json={"data": bad}), 400, "data")
        assert list(body["errors"]) == ["data"], (bad, body)
    assert_problem(p1.post("/api/projects/p1/models/iris_model/predict",
                           json={"data": [SETOSA], "extra": 1}), 400, "extra")
    empty = p1.post("/api/projects/p1/models/iris_model/predict", json={"data": []})
    assert empty.status_code == 200 and empty.get_json() == []
    # Numbers so large that scaling them overflows failed the batch (422): the batch is
    # predicted again with them unknown.
    extreme = {**SETOSA, "sepal_length": 1e308, "sepal_width": -1e308}
    answered = p1.post("/api/projects/p1/models/iris_model/predict",
                       json={"data": [SETOSA, extreme]})
    assert answered.status_code == 200, answered.get_json()
    first, second = answered.get_json()
    assert "unknown_inputs" not in json.loads(first["species_explain"])
    assert json.loads(second["species_explain"])["unknown_inputs"] == {
        "sepal_length": "1e+308 is too large to use",
        "sepal_width": "-1e+308 is too large to use"}
    # Numbers sent as text are read as numbers.
    ok = p1.post("/api/projects/p1/models/iris_model/predict",
                 json={"data": [{k: str(v) for k, v in VIRGINICA.items()}]})
    assert ok.status_code == 200 and ok.get_json()[0]["species"] == "virginica"


def test_diabetes_regression(p1):
    # lightwood (MindsDB's default engine) is an alias: MindsDB statements run unchanged.
    response = create(p1, DIABETES_SQL.format(name="diabetes_model")
                      + ", engine = 'lightwood', problem = 'regression', "
                        "validation_fraction = 0.2")
    assert response.status_code == 201, response.get_json()
    record = response.get_json()
    assert record["status"] == "complete" and record["accuracy"] >= 0.3
    assert record["engine"] == "lightwood"
    assert record["training_options"]["using"]["problem"] == "regression"
    info = p1.get("/api/projects/p1/models/diabetes_model/describe").get_json()[0]
    assert info["accuracies"] == {"r2_score": record["accuracy"]}
    importances = info["column_importances"]
    assert len(importances) == 10
    top_two = sorted(importances, key=importances.get, reverse=True)[:2]
    assert {"bmi", "s5"} & set(top_two), importances
    candidates = p1.get("/api/projects/p1/models/diabetes_model/describe",
                        json={"attribute": "model"}).get_json()
    assert {c["accuracy_functions"][0] for c in candidates} == {"r2_score"}

    # A high-risk and a low-risk patient of the data set (progression 310 and 25).
    rows = [{"age": 49, "sex": 2, "bmi": 37.1, "bp": 115, "s1": 203, "s2": 136.2, "s3": 37,
             "s4": 5.4, "s5": 5.2, "s6": 97},
            {"age": 30, "sex": 1, "bmi": 19.9, "bp": 78, "s1": 180, "s2": 110.4, "s3": 55,
             "s4": 3.3, "s5": 4.1, "s6": 84}]
    answers = p1.post("/api/projects/p1/models/diabetes_model/predict",
                      json={"data": rows}).get_json()
    high, low = (a["progression"] for a in answers)
    assert high > 200 > 120 > low
    for answer in answers:
        explain = json.loads(answer["progression_explain"])
        assert explain["confidence_lower_bound"] < answer["progression"] \
            < explain["confidence_upper_bound"]
        assert answer["progression_min"] == explain["confidence_lower_bound"]
        assert answer["progression_confidence"] == explain["confidence"] == 0.9


def test_model_in_default_project_and_project_mismatch(client):
    # A bare model name lands in the project of the route.
    response = create(client, "CREATE MODEL m1 FROM demo (SELECT * FROM iris WHERE 1 = 0) "
                              "PREDICT species", project="mindsdb")
    assert response.status_code == 201
    assert client.get("/api/projects/mindsdb/models/m1").get_json()["id"] == \
        response.get_json()["id"]
    assert client.post("/api/projects", json={"name": "p2"}).status_code == 201
    assert_problem(create(client, "CREATE MODEL mindsdb.m2 FROM demo (SELECT * FROM iris) "
                                  "PREDICT species", project="p2"), 422, "mindsdb", "p2")


def test_training_query_without_data_source_names_it_in_its_tables(p1):
    # mindsdb_sdk's models.create(query="SELECT … FROM demo.iris") sends FROM (SELECT …)
    # with no data source: the one its qualified tables name is used.
    response = create(p1, "CREATE MODEL p1.m1 FROM (SELECT * FROM demo.iris WHERE 1 = 0) "
                          "PREDICT species")
    assert response.status_code == 201, response.get_json()
    record = response.get_json()
    assert record["data_source"] == "demo"
    assert record["fetch_data_query"] == "SELECT * FROM demo.iris WHERE 1 = 0"
    assert_problem(create(p1, "CREATE MODEL p1.m2 FROM (SELECT 1 AS a) PREDICT a"),
                   422, "data source")
    assert_problem(create(p1, "CREATE MODEL p1.m2 FROM (SELECT * FROM iris) PREDICT a"),
                   422, "iris")
    assert_problem(create(p1, "CREATE MODEL p1.m2 FROM (DELETE FROM demo.iris) PREDICT a"),
                   422, "DELETE")
    assert [m["name"] for m in p1.get("/api/projects/p1/models").get_json()] == ["m1"]
