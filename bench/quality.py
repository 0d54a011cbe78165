"""Model quality benchmark of issue 16: what describe claims, next to plain baselines.

For each data set a fresh hold-out (20 %, seed 1) is put aside first; Quarry's trainer
(``app.ml.train``, the code the service runs) sees only the rest. Reported per data set:

- ``quarry``: the cross-validated score describe reports, with its spread (std over folds);
- ``best_baseline``: the best of LinearRegression/LogisticRegression, RandomForest and
  HistGradientBoosting with default parameters, scored on the same folds of the same rows,
  behind the same column preprocessing (aim: quarry >= best_baseline - 0.01);
- ``holdout``: the stored model's score on the fresh hold-out, through ``app.ml.predict``
  (aim: within quarry +- spread);
- ``ece``: describe's expected calibration error (cross-fitted, out of fold) and the same
  figure on the fresh hold-out; ``coverage``: the regression interval's share of truths,
  likewise (aims: ECE <= 0.05; coverage near 0.9);
- ``seconds``: Quarry's training time (aims: <= 10 s up to 10 000 rows, <= 60 s at 100 000).

    .venv/bin/python bench/quality.py [--only iris,wine] [--big-rows 100000]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np
import pandas as pd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from sklearn import datasets  # noqa: E402
from sklearn.base import clone  # noqa: E402
from sklearn.ensemble import (  # noqa: E402
    HistGradientBoostingClassifier,
    HistGradientBoostingRegressor,
    RandomForestClassifier,
    RandomForestRegressor,
)
from sklearn.linear_model import LinearRegression, LogisticRegression  # noqa: E402

from app.ml import predict, train  # noqa: E402
from app.ml.columns import infer_column, normalise  # noqa: E402
from app.ml.selection import make_folds, score  # noqa: E402
from app.ml.threads import one_native_thread  # noqa: E402
from app.ml.training import _inputs, _pipeline, _target, prepare_frame  # noqa: E402
from app.sql.demo import demo_tables  # noqa: E402


def demo(table: str, target: str) -> tuple[pd.DataFrame, str]:
    columns, rows = demo_tables()[table]
    return pd.DataFrame.from_records(rows, columns=columns), target


def bundled(loader, target: str | None = None) -> tuple[pd.DataFrame, str]:
    bunch = loader(as_frame=True)
    frame = bunch.data.copy()
    targets = bunch.target if isinstance(bunch.target, pd.DataFrame) \
        else bunch.target.to_frame("target")
    name = target or targets.columns[0]
    frame[name] = targets[name].to_numpy()
    return frame, name


def mixed(rows: int, seed: int = 0) -> tuple[pd.DataFrame, str]:
    """rows x 20 columns: 12 numbers, 4 categories, 2 booleans, 1 date, 1 id; a class target."""
    rng = np.random.default_rng(seed)
    data: dict[str, object] = {}
    for i in range(12):
        data[f"x{i}"] = rng.normal(size=rows)
    for i in range(4):
        data[f"c{i}"] = rng.choice([f"v{j}" for j in range(6 + 3 * i)], size=rows)
    data["b0"] = rng.random(rows) < 0.3
    data["b1"] = rng.random(rows) < 0.6
    days = rng.integers(0, 730, size=rows)
    data["day"] = (pd.Timestamp("2022-01-01") + pd.to_timedelta(days, unit="D")).strftime(
        "%Y-%m-%d")
    data["row_id"] = np.arange(rows)
    frame = pd.DataFrame(data)
    frame.loc[rng.random(rows) < 0.05, "x3"] = np.nan  # gaps, flagged by the imputer
    weekday = pd.to_datetime(frame["day"]).dt.day_of_week.to_numpy()
    signal = (frame["x0"] - 0.8 * frame["x1"] + 0.5 * frame["x2"] * frame["x4"]
              + (frame["c0"] == "v1") * 1.2 + frame["b0"] * 0.7 + (weekday >= 5) * 0.9
              + np.sin(frame["x5"] * 2)).to_numpy()
    noisy = signal + rng.normal(scale=1.0, size=rows)
    frame["label"] = np.where(noisy > np.quantile(noisy, 0.66), "high",
                              np.where(noisy > np.quantile(noisy, 0.33), "mid", "low"))
    return frame, "label"


def baselines(problem: str, random_state: int = 0) -> dict[str, object]:
    if problem == "classification":
        return {"LogisticRegression": LogisticRegression(),
                "RandomForestClassifier": RandomForestClassifier(random_state=random_state,
                                                                 n_jobs=2),
                "HistGradientBoostingClassifier": HistGradientBoostingClassifier(
                    random_state=random_state)}
    return {"LinearRegression": LinearRegression(),
            "RandomForestRegressor": RandomForestRegressor(random_state=random_state, n_jobs=2),
            "HistGradientBoostingRegressor": HistGradientBoostingRegressor(
                random_state=random_state)}


def baseline_scores(frame: pd.DataFrame, target: str) -> dict[str, float]:
    """Each default estimator's mean score on the folds Quarry's trainer draws for ``frame``."""
    frame, goal = _target(frame, target, None)
    columns = [infer_column(n, *normalise(frame[n])) for n in frame.columns if n != goal.name]
    used = _inputs(columns, goal.name)
    X = prepare_frame(frame, used)  # noqa: N806
    y = goal.values
    folds = make_folds(y, goal.problem, 0)
    out = {}
    for name, estimator in baselines(goal.problem).items():
        scores = []
        for k, test in enumerate(folds.tests):
            model = _pipeline(used, clone(estimator))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                model.fit(X.iloc[folds.train_index(k)], y[folds.train_index(k)])
            scores.append(score(goal.problem, y[test], model.predict(X.iloc[test])))
        out[name] = round(float(np.mean(scores)), 4)
    return out


def ece(confidence: np.ndarray, correct: np.ndarray, bins: int = 10) -> float:
    """Expected calibration error over equal-width bins of the answers' confidence."""
    which = np.minimum((confidence * bins).astype(int), bins - 1)
    return float(sum((which == b).mean() * abs(correct[which == b].mean()
                                               - confidence[which == b].mean())
                     for b in range(bins) if (which == b).any()))


def holdout_split(frame: pd.DataFrame, seed: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    order = np.random.default_rng(seed).permutation(len(frame))
    cut = int(len(frame) * 0.8)
    return frame.iloc[order[:cut]].reset_index(drop=True), \
        frame.iloc[order[cut:]].reset_index(drop=True)


def run(name: str, frame: pd.DataFrame, target: str) -> dict[str, object]:
    seen, fresh = holdout_split(frame)
    started = time.perf_counter()
    result = train(seen, target)
    seconds = time.perf_counter() - started
    info = result.description["info"]
    metric = next(iter(info["accuracies"]))
    reported, spread = info["accuracies"][metric], info["accuracy_std"][metric]
    chosen = next(m for m in result.description["model"] if m["selected"])
    with one_native_thread():
        base = baseline_scores(seen, target)
    rows = fresh.drop(columns=[target]).to_dict("records")
    answers = predict(result.artifact, rows)
    truth = fresh[target].to_numpy()
    predicted = np.array([a[target] for a in answers])
    row: dict[str, object] = {
        "data": name, "rows": len(seen), "problem": result.problem, "metric": metric,
        "quarry": reported, "spread": spread, "chosen": f"{chosen['name']} {chosen['params']}",
        "best_baseline": max(base.values()), "baselines": base,
        "seconds": round(seconds, 1)}
    if result.problem == "classification":
        truth = truth.astype(predicted.dtype) if predicted.dtype != object else truth
        row["holdout"] = round(score("classification", truth, predicted), 4)
        confidence = np.array([a[f"{target}_confidence"] for a in answers])
        correct = predicted == truth
        row["ece_cv"] = info["calibration"]["expected_calibration_error"]
        row["ece_holdout"] = round(ece(confidence, correct), 4)
    else:
        row["holdout"] = round(score("regression", truth.astype(float), predicted.astype(float)),
                               4)
        low = np.array([a[f"{target}_min"] for a in answers])
        high = np.array([a[f"{target}_max"] for a in answers])
        row["coverage_cv"] = info["interval"]["coverage"]
        row["coverage_holdout"] = round(float(np.mean((truth >= low) & (truth <= high))), 4)
    row["aim_baseline"] = reported >= row["best_baseline"] - 0.01
    row["aim_holdout"] = abs(row["holdout"] - reported) <= spread
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="")
    parser.add_argument("--big-rows", type=int, default=100_000)
    args = parser.parse_args()
    sets = {
        "iris": lambda: demo("iris", "species"),
        "wine": lambda: demo("wine", "cultivar"),
        "breast_cancer": lambda: demo("breast_cancer", "diagnosis"),
        "diabetes": lambda: demo("diabetes", "progression"),
        "digits": lambda: bundled(datasets.load_digits),
        "linnerud": lambda: bundled(datasets.load_linnerud, "Weight"),
        "mixed": lambda: mixed(int(args.big_rows / 0.8)),
    }
    only = [s for s in args.only.split(",") if s] or list(sets)
    for name in only:
        frame, target = sets[name]()
        print(json.dumps(run(name, frame, target)), flush=True)


if __name__ == "__main__":
    main()
