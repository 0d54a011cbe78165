"""The numpy route for numeric models (app/ml/fastpath.py) answers exactly as the pipeline."""

from __future__ import annotations

import random

import pytest

from app import ml
from app.extensions import db
from app.store import MLModel
from tests.models.conftest import DIABETES_SQL, IRIS_SQL, create

CASES = [("iris_model", IRIS_SQL, ["sepal_length", "sepal_width", "petal_length",
                                   "petal_width"]),
         ("diabetes_model", DIABETES_SQL, ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4",
                                           "s5", "s6"])]


@pytest.mark.parametrize("name, statement, columns", CASES, ids=[c[0] for c in CASES])
def test_fast_path_matches_the_pipeline(app, p1, name, statement, columns):
    assert create(p1, statement.format(name=name)).status_code == 201
    with app.app_context():
        artifact = db.session.query(MLModel).filter_by(name=name).one().artifact
    fast = ml.load_model(artifact)
    assert fast.fast is not None  # numeric inputs: the numpy route is taken
    slow = ml.load_model(artifact)
    slow.fast = None
    rng = random.Random(7)
    rows = [{c: (None if rng.random() < 0.1 else round(rng.uniform(-3, 8), 3))
             for c in columns} for _ in range(300)]
    rows.append({})  # every input missing: all imputed
    rows.append({c.upper(): "1.5" for c in columns})  # names in another case, numbers as text
    for batch in (rows[:1], rows[-2:], rows):
        assert ml.predict(fast, batch) == ml.predict(slow, batch)
