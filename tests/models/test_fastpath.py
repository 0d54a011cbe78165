"""The numpy route for numeric models (app/ml/fastpath.py) answers exactly as the pipeline:
the same predictions, the same calibrated confidences, the same _min/_max intervals."""

from __future__ import annotations

import json
import random

import pytest

from app import ml
from app.extensions import db
from app.ml.measures import CalibratedModel
from app.store import MLModel
from tests.models.conftest import DIABETES_SQL, IRIS_SQL, create

IRIS = ["sepal_length", "sepal_width", "petal_length", "petal_width"]
SETOSA_ROW = {"sepal_length": 5.1, "sepal_width": 3.5, "petal_length": 1.4, "petal_width": 0.2}
DIABETES = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]
# Gaps in the training rows: the imputers then add missing-value flags (add_indicator), which
# the numpy route replays too.
GAPPY_SQL = ("CREATE MODEL p1.{name} FROM demo (SELECT CASE WHEN sepal_length > 6.5 THEN NULL "
             "ELSE sepal_length END AS sepal_length, sepal_width, CASE WHEN petal_width < 0.3 "
             "THEN NULL ELSE petal_length END AS petal_length, petal_width, species FROM iris) "
             "PREDICT species USING join_learn_process = true")
GAPPY_REGRESSION_SQL = ("CREATE MODEL p1.{name} FROM demo (SELECT CASE WHEN bmi > 30 THEN NULL "
                        "ELSE bmi END AS bmi, age, sex, bp, s1, progression FROM diabetes) "
                        "PREDICT progression USING join_learn_process = true")

CASES = [("iris_model", IRIS_SQL, IRIS, "classification"),
         ("diabetes_model", DIABETES_SQL, DIABETES, "regression"),
         ("gappy_iris", GAPPY_SQL, IRIS, "classification"),
         ("gappy_diabetes", GAPPY_REGRESSION_SQL, ["bmi", "age", "sex", "bp", "s1"],
          "regression")]


@pytest.mark.parametrize("name, statement, columns, problem", CASES, ids=[c[0] for c in CASES])
def test_fast_path_matches_the_pipeline(app, p1, name, statement, columns, problem):
    answer = create(p1, statement.format(name=name))
    assert answer.status_code == 201, answer.get_json()
    with app.app_context():
        artifact = db.session.query(MLModel).filter_by(name=name).one().artifact
    fast = ml.load_model(artifact)
    assert fast.fast is not None  # numeric inputs: the numpy route is taken
    assert fast.problem == problem
    if problem == "classification":
        # The stored classifier is calibrated: the numpy route applies its temperature too.
        assert isinstance(fast.pipeline, CalibratedModel)
        assert fast.fast.temperature == fast.pipeline.temperature
    else:
        assert fast.interval is not None
    if name.startswith("gappy"):
        imputer = fast.pipeline.steps[0][1].transformers_[0][1].steps[0][1]
        assert imputer.add_indicator and len(imputer.indicator_.features_) > 0
    slow = ml.load_model(artifact)
    slow.fast = None
    rng = random.Random(7)
    rows = [{c: (None if rng.random() < 0.1 else round(rng.uniform(-3, 8), 3))
             for c in columns} for _ in range(300)]
    rows.append({})  # every input missing: all imputed
    rows.append({c.upper(): "1.5" for c in columns})  # names in another case, numbers as text
    for batch in (rows[:1], rows[-2:], rows):
        fast_answer, slow_answer = ml.predict(fast, batch), ml.predict(slow, batch)
        assert fast_answer == slow_answer
    target = fast.target
    for row in fast_answer:  # the explanation is the JSON text json.dumps writes
        explain = row[f"{target}_explain"]
        assert json.dumps(json.loads(explain)) == explain
        assert json.loads(explain)["predicted_value"] == row[target]
    if problem == "classification":
        confidences = {row[f"{target}_confidence"] for row in fast_answer}
        assert len(confidences) > 1 and all(0 < c <= 1 for c in confidences)
    else:
        assert all(row[f"{target}_min"] < row[target] < row[f"{target}_max"]
                   for row in fast_answer)


def test_bad_and_huge_values_are_read_alike(app, p1):
    assert create(p1, IRIS_SQL.format(name="strict_iris")).status_code == 201
    with app.app_context():
        artifact = db.session.query(MLModel).filter_by(name="strict_iris").one().artifact
    fast = ml.load_model(artifact)
    slow = ml.load_model(artifact)
    slow.fast = None
    assert fast.fast is not None
    # A value that cannot be read is an unknown input on both routes, flagged alike.
    rows = [{**SETOSA_ROW, "sepal_length": "long"}, {"sepal_length": None}]
    assert ml.predict(fast, rows) == ml.predict(slow, rows)
    assert "unknown_inputs" in ml.predict(fast, rows)[0]["species_explain"]
    # Numbers too large to scale are unknown inputs on both routes, alike.
    huge = [{**SETOSA_ROW, "sepal_length": 1e308, "sepal_width": -1e308}, SETOSA_ROW]
    assert ml.predict(fast, huge) == ml.predict(slow, huge)
    assert "too large" in ml.predict(fast, huge)[0]["species_explain"]
