"""Models on very small tables (issue 30 §8): the cross-validation is repeated, describe
shows the spread of its figure, and the kept model is no worse than a linear or boosting
baseline chosen by cross-validation, minus one standard error, on rows none of them saw."""

from __future__ import annotations

import json
import math
import sqlite3
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_diabetes
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import GridSearchCV, KFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from tests.conftest import fresh_store_url
from tests.models.conftest import create

# scikit-learn's diabetes table: TRAIN_ROWS drawn at random (SPLIT_SEED) train, the other
# 352 rows are held out. Ridge is the best model on them (R² 0.38-0.41 at any strength);
# boosting (0.30) and a forest (0.28) score more than one standard error below it.
TRAIN_ROWS, SPLIT_SEED = 90, 5
COLUMNS = ["age", "sex", "bmi", "bp", "s1", "s2", "s3", "s4", "s5", "s6"]


@pytest.fixture(params=["sqlite"])
def store_url(request, tmp_path) -> str:
    # What is measured here does not depend on the store: one kind keeps the suite short.
    return fresh_store_url(request, tmp_path)


@pytest.fixture
def split():
    data = load_diabetes()
    order = np.random.default_rng(SPLIT_SEED).permutation(len(data.target))
    train, held = order[:TRAIN_ROWS], order[TRAIN_ROWS:]
    return (data.data[train], data.target[train]), (data.data[held], data.target[held])


@pytest.fixture
def small(make_app, tmp_path, split):
    """A client with project p1 and a SQLite data source holding the 90 training rows."""
    (x, y), _ = split
    path = tmp_path / "small.db"
    conn = sqlite3.connect(path)
    conn.execute(f"CREATE TABLE seen ({', '.join(f'{c} REAL' for c in COLUMNS)}, "
                 "progression REAL)")
    conn.executemany(f"INSERT INTO seen VALUES ({', '.join('?' * (len(COLUMNS) + 1))})",
                     [(*map(float, row), float(target)) for row, target in zip(x, y,
                                                                                strict=True)])
    conn.commit()
    conn.close()
    client = make_app(DATA_SOURCES={"small": f"sqlite:///{path}"}).test_client()
    assert client.post("/api/projects", json={"name": "p1"}).status_code == 201
    return client


def _baselines(x, y, x_held) -> dict[str, tuple[float, np.ndarray]]:
    """{kind: (5-fold CV mean R², predictions of the held-out rows)}: ridge with its
    strength, and gradient boosting with its tree and leaf sizes, chosen by grid search."""
    folds = KFold(5, shuffle=True, random_state=0)
    searches = {
        "linear": GridSearchCV(make_pipeline(StandardScaler(), Ridge()),
                               {"ridge__alpha": [0.01, 0.1, 1.0, 10.0, 100.0]}, cv=folds),
        "boosting": GridSearchCV(HistGradientBoostingRegressor(random_state=0),
                                 {"max_leaf_nodes": [8, 31], "min_samples_leaf": [5, 20]},
                                 cv=folds),
    }
    found = {}
    for kind, search in searches.items():
        search.fit(x, y)
        found[kind] = (float(search.best_score_), search.predict(x_held))
    return found


def _score_se(truth: np.ndarray, predicted: np.ndarray) -> float:
    """The bootstrap standard error of R² over the held-out rows (500 resamples)."""
    rng = np.random.default_rng(0)
    picks = (rng.integers(0, len(truth), len(truth)) for _ in range(500))
    return float(np.std([r2_score(truth[p], predicted[p]) for p in picks], ddof=1))


@pytest.mark.slow
def test_small_table_repeats_its_folds_and_keeps_a_model_as_good_as_the_baselines(small,
                                                                                 split):
    made = create(small, "CREATE MODEL p1.m FROM small (SELECT * FROM seen) PREDICT "
                         "progression USING join_learn_process = true, time_budget_s = 60")
    assert made.status_code == 201, made.get_json()
    info = small.get("/api/projects/p1/models/m/describe").get_json()[0]

    # The cross-validation was repeated: 90 rows ask for 4 partitions of 5 folds (300
    # out-of-fold predictions); the budget decides how many ran, and describe says so
    # (60 s: on an idle machine all four take about 3 s, and training ends there; at a load
    # average of 15, 20 s held only one).
    scores = info["evaluation"]["fold_scores"]
    assert info["folds"] == 5 and 2 <= info["repeats"] <= 4
    assert len(scores) == 5 * info["repeats"] == info["evaluation"]["repeats"] * 5
    assert f"repeated {info['repeats']} times" in info["evaluation"]["method"]
    # The figure and its spread: the mean, its standard deviation and its standard error,
    # corrected for folds that share rows (18 of 90 held out: s sqrt(1/J + 18/72)).
    mean, s = float(np.mean(scores)), float(np.std(scores, ddof=1))
    assert info["accuracies"]["r2_score"] == made.get_json()["accuracy"]
    assert info["accuracies"]["r2_score"] == pytest.approx(mean, abs=1e-4)
    assert info["accuracy_std"]["r2_score"] == pytest.approx(np.std(scores), abs=1e-4)
    se = s * math.sqrt(1 / len(scores) + 18 / 72)
    assert info["accuracy_se"]["r2_score"] == pytest.approx(se, abs=2e-4)
    assert info["evaluation"]["standard_error"] == info["accuracy_se"]["r2_score"]
    # The rows the measures read are the first partition's: one prediction per row.
    assert info["evaluation"]["rows_scored"] == info["residuals"]["rows"] == TRAIN_ROWS
    # SQL's DESCRIBE answers the same figures.
    described = small.post("/api/sql/query", json={"query": "DESCRIBE p1.m.info"}).get_json()
    row = dict(zip(described["column_names"], described["data"][0], strict=True))
    spread = row["accuracy_se"]
    assert row["repeats"] == info["repeats"]
    assert (json.loads(spread) if isinstance(spread, str) else spread) == info["accuracy_se"]

    # The kept candidate: the simplest whose mean is within one standard error of the best.
    candidates = small.get("/api/projects/p1/models/m/describe?attribute=model").get_json()
    finished = [c for c in candidates if c["error"] is None and c["stopped"] is None]
    assert all(c["folds_scored"] == c["folds"] == 5 * info["repeats"] for c in finished)
    best = max(finished, key=lambda c: c["performance"])
    (kept,) = [c for c in candidates if c["selected"]]
    assert kept["performance"] >= best["performance"] - best["performance_se"] - 1e-4
    choice = info["search"]["choice"]
    assert choice["standard_error"] == best["performance_se"]
    assert choice["chosen"].startswith(kept["name"])

    # On the 352 rows nobody trained on, Quarry's model is no worse than the better (by
    # cross-validation on the same 90 rows) of a CV-chosen ridge and a CV-chosen boosting,
    # minus one standard error of that baseline's held-out score (about 0.04 here).
    (x, y), (x_held, y_held) = split
    rows = [dict(zip(COLUMNS, map(float, r), strict=True)) for r in x_held]
    answered = small.post("/api/projects/p1/models/m/predict", json={"data": rows})
    assert answered.status_code == 200, answered.get_json()
    ours = np.array([r["progression"] for r in answered.get_json()], dtype=float)
    # One native thread: OpenMP's spinning threads crawl on a busy shared machine.
    with warnings.catch_warnings(), threadpool_limits(1):
        warnings.simplefilter("ignore")
        found = _baselines(x, y, x_held)
    chosen = max(found, key=lambda kind: found[kind][0])
    theirs = found[chosen][1]
    quarry, baseline = r2_score(y_held, ours), r2_score(y_held, theirs)
    margin = _score_se(y_held, theirs)
    assert quarry >= baseline - margin, (quarry, chosen, baseline, margin, kept)
